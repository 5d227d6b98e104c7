//! The pages a person reads: `report.html` of a gate run (hostile answers escaped, the divergence from the
//! baseline marked, the history drawn), `baseline history --html` over three promotions (and a broken chain
//! shown as broken), `bench.html`, `report RUN --format …` and the shell completions. Each page is loaded in
//! headless Chromium: no console message, and what a person looks for is in the DOM it built.

use super::*;
use crate::common::{assert_self_contained, dom_in_chromium, gauntlet_to_file};

/// An answer that tries everything a server could put into a page: markup, a script, an outside image, an
/// attribute break-out and a terminal escape.
fn hostile(word: &str) -> String {
    format!("{} <script>alert(1)</script><img src=x onerror=alert(2)>\"'><b>bold</b> \u{1b}[31m", answer(word))
}

fn answers_with(gamma: &str) -> Vec<(&'static str, String)> {
    let mut a = good_answers();
    a.retain(|(k, _)| *k != "Say alpha." && *k != "Say gamma.");
    a.push(("Say alpha.", hostile("alpha")));
    a.push(("Say gamma.", gamma.to_owned()));
    a
}

/// With `GAUNTLET_KEEP_PAGES=DIR`, a copy of each page the tests render lands there (the book's screenshots,
/// docs/src/screenshots/, are taken from such copies).
fn keep(page: &Path, name: &str) {
    if let Some(dir) = std::env::var_os("GAUNTLET_KEEP_PAGES") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(page, dir.join(name)).unwrap();
    }
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

#[test]
fn run_report_html_and_baseline_history_render_in_chromium() {
    let store = tempfile::tempdir().unwrap();
    let store_s = store.path().to_str().unwrap().to_owned();
    let promote = |f: &Fixture, out: &str, note: &str| {
        let run = f.run_into(out, &["--store", &store_s, "--promote", "--trusted", "--note", note]);
        assert_eq!(run.code, 0, "{}", run.explain());
        assert!(run.stdout.contains("promoted: #"), "{}", run.explain());
        run
    };
    let f = Fixture::new("html-run").answers(answers_with(&answer("gamma")));
    promote(&f, "first", "first <b>note</b>");
    let f = f.answers(answers_with(&answer("gamma changed")));
    promote(&f, "second", "second");
    let f = f.answers(answers_with(&answer("gamma")));
    let third = promote(&f, "third", "third");

    let page = third.out.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html, "report.html");
    // The server's markup is text on the page, never markup.
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x"), "the answer is shown, escaped");
    assert!(!html.contains("<script>alert") && !html.contains("<b>bold") && !html.contains('\u{1b}'));
    assert!(html.contains("first &lt;b&gt;note&lt;/b&gt;"), "a promotion note is escaped too");
    // gamma changed in the second run and changed back: the diff marks the first differing character.
    assert!(html.contains("differs at character 6"), "gamma's divergence");
    assert!(html.contains("<mark>c</mark>") && html.contains("<del>"), "the baseline's side marks `changed`");
    keep(&page, "report.html");
    let (dom, console) = dom_in_chromium(&page);
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    assert!(dom.contains(r#"id="verdict">WARN</span>"#), "the verdict, upper case");
    assert!(dom.contains("<dd id=\"model\">tiny ("), "the model name");
    for title in [
        "<title>gamma: ",                        // the streamed case's timeline
        "<title>decode speed across promotions", // the history
        "<title>load time across promotions",
    ] {
        assert_eq!(count(&dom, title), 1, "one chart `{title}`");
    }
    assert_eq!(count(&dom, "<tr id=\"case-"), 5, "one row per case");
    assert!(dom.contains("recipe.model.sha256"), "the identity field by field");
    assert!(dom.contains("<details open=\"\"><summary class=\"differs\">differs at character 6"), "{dom}");

    // The history of the identity: three promotions, every trend, the chain verified.
    let out = store.path().join("history.html");
    let args = ["baseline", "history", "--store", &store_s, "--profile", "test", "--html", out.to_str().unwrap()];
    let (code, stdout, stderr) = gauntlet_to_file(&args, &[], Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 promotion(s), chain verified"), "{stdout}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert_self_contained(&html, "the history page");
    keep(&out, "baseline-history.html");
    let (dom, console) = dom_in_chromium(&out);
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    assert!(dom.contains("<span class=\"pass\">verified</span>"), "chain status");
    assert!(dom.contains("<dd>tiny</dd>"), "the model name");
    for title in [
        "decode speed across promotions",
        "load time across promotions",
        "passed cases across promotions",
        "text changes against the promotion before",
    ] {
        assert_eq!(count(&dom, &format!("<title>{title}")), 1, "one chart `{title}`");
    }
    // One dot per promotion in each trend (two text-change points: the first promotion has nothing before it).
    assert_eq!(count(&dom, "<circle"), 3 + 3 + 3 + 2, "{dom}");
    assert!(dom.contains("first &lt;b&gt;note&lt;/b&gt;"), "notes shown, escaped");
    assert!(dom.contains("<td>2 / 5</td>") || dom.contains("<td>5 / 5</td>"), "passed cases");

    // An edited note breaks the chain: the page says so and the command fails.
    let history = std::fs::read_dir(store.path().join("history")).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&history).unwrap();
    std::fs::write(&history, text.replacen("\"second\"", "\"edited\"", 1)).unwrap();
    let (code, stdout, _) = gauntlet_to_file(&args, &[], Duration::from_secs(60));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("chain BROKEN"), "{stdout}");
    assert!(std::fs::read_to_string(&out).unwrap().contains("<span class=\"fail\">BROKEN</span>"));
}

#[test]
fn report_renders_a_stored_run_again_in_every_format() {
    let f = Fixture::new("html-rerender");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let dir = run.out.to_str().unwrap();
    let render = |target: &str, format: &str| {
        let (code, stdout, stderr) =
            gauntlet_to_file(&["report", target, "--format", format], &[], Duration::from_secs(30));
        assert_eq!(code, Some(0), "{format}: {stderr}");
        stdout
    };
    let on_disk = |name: &str| std::fs::read_to_string(run.out.join(name)).unwrap();
    assert_eq!(render(dir, "md"), on_disk("report.md"));
    assert_eq!(render(&format!("{dir}/run.json"), "junit"), on_disk("junit.xml"));
    assert_eq!(render(dir, "html"), on_disk("report.html"), "no store, no baseline: the very same page");
    let json: serde_json::Value = serde_json::from_str(&render(dir, "json")).unwrap();
    assert_eq!(json["verdict"], run.record.as_ref().unwrap()["verdict"]);
    // Flags that belong to the other mode are refused, not ignored.
    let (code, _, stderr) = gauntlet_to_file(&["report", dir, "--out", dir], &[], Duration::from_secs(30));
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) =
        gauntlet_to_file(&["report", "--merge", dir, "--format", "html"], &[], Duration::from_secs(30));
    assert_eq!(code, Some(2), "{stderr}");
    // The merge still works beside it.
    let (code, stdout, stderr) = gauntlet_to_file(&["report", "--merge", dir], &[], Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("test"), "{stdout}");
    // A file that is not a run record is bad input.
    let (code, _, stderr) =
        gauntlet_to_file(&["report", f.path().join("suite.toml").to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(code, Some(2), "{stderr}");
}

#[test]
fn completions_print_a_script_for_each_shell() {
    for (shell, marker) in [("bash", "complete -F"), ("zsh", "#compdef gauntlet"), ("fish", "complete -c gauntlet")] {
        let (code, stdout, stderr) = gauntlet_to_file(&["completions", shell], &[], Duration::from_secs(30));
        assert_eq!(code, Some(0), "{shell}: {stderr}");
        assert!(stdout.contains(marker), "{shell}: {}", &stdout[..stdout.len().min(400)]);
        for word in ["qualify", "baseline", "history", "concurrency"] {
            assert!(stdout.contains(word), "{shell} completes `{word}`");
        }
    }
    if std::process::Command::new("bash").arg("--version").output().is_ok() {
        let (_, script, _) = gauntlet_to_file(&["completions", "bash"], &[], Duration::from_secs(30));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gauntlet.bash");
        std::fs::write(&path, script).unwrap();
        // The script loads in bash and completes the first word.
        let check = format!(
            "source {}; COMP_WORDS=(gauntlet bas); COMP_CWORD=1; _gauntlet gauntlet bas gauntlet; echo \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let o = std::process::Command::new("bash").args(["--norc", "-c", &check]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "baseline", "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (code, _, _) = gauntlet_to_file(&["completions", "tcsh-nope"], &[], Duration::from_secs(30));
    assert_eq!(code, Some(2));
}

#[test]
fn bench_html_draws_the_distributions_throughput_and_comparison() {
    let f = Fixture::new("html-bench").answers(vec![("__token_delay_ms", "4".to_owned()), ("", answer("word"))]);
    let (code, stdout, _, first) = super::bench::bench_fixture(&f, "first", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let baseline = first.join("bench.json");
    let (_, stdout, record, out) =
        super::bench::bench_fixture(&f, "second", &["--baseline", baseline.to_str().unwrap()]);
    assert!(record["levels"][0]["comparisons"].as_array().is_some_and(|c| !c.is_empty()), "{stdout}");
    let page = out.join("bench.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html, "bench.html");
    keep(&page, "bench.html");
    let (dom, console) = dom_in_chromium(&page);
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));
    let verdict = record["verdict"].as_str().unwrap().to_uppercase();
    assert!(dom.contains(&format!("id=\"verdict\">{verdict}</span>")), "the verdict");
    assert!(dom.contains("<dd id=\"model\">tiny</dd>"), "the model name");
    for title in [
        "time to first token (TTFT): cumulative distribution",
        "inter-token latency (ITL: gaps between streamed chunks, pooled): cumulative distribution",
        "end-to-end latency (E2EL): cumulative distribution",
        "output throughput against concurrency",
        "relative change against the baseline, with its interval",
    ] {
        assert_eq!(count(&dom, &format!("<title>{title}")), 1, "one chart `{title}`");
    }
    assert!(dom.contains("baseline (batch mean)"), "the baseline's throughput beside this bench's");
    // The first record had nothing to compare with, and says so.
    let first_page = std::fs::read_to_string(first.join("bench.html")).unwrap();
    assert!(first_page.contains("nothing compared"), "a candidate says it compared nothing");
}
