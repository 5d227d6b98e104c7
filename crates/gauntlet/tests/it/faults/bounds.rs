//! Every wait has a deadline and the bench holds bounded text: an open loop at the lowest rate gauntlet paces ends
//! within the request timeout, a git that hangs is killed at the helper deadline, and a server streaming a long
//! answer leaves only a few KiB of its text in the bench record, every event's time kept.

use super::*;

fn bench_once(f: &Fixture, out: &str, extra: &[&str], limit: Duration) -> (Option<i32>, String, serde_json::Value) {
    let manifest = f.write();
    let out = f.path().join(out);
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--warmups", "0", "--samples", "1"];
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = gauntlet(&args, &[], limit);
    assert_no_survivors(&f.tag);
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let record = std::fs::read_to_string(out.join("bench.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|e| panic!("no bench.json ({e}): {text}"));
    (o.status.code(), text, record)
}

/// At one request per million seconds the second arrival of a batch lies days away: it is failed with the reason
/// when the request timeout (3 s here) has passed, and the bench ends instead of waiting for it.
#[test]
fn open_loop_at_the_lowest_rate_ends_within_the_request_timeout() {
    let f = Fixture::new("rate-floor");
    let started = std::time::Instant::now();
    let (code, text, record) =
        bench_once(&f, "bench", &["--concurrency", "2", "--rate", "0.000001"], Duration::from_secs(60));
    assert_eq!(code, Some(1), "{text}");
    assert!(started.elapsed() < Duration::from_secs(45), "took {:?}", started.elapsed());
    let requests = record["levels"][0]["batches"][0]["requests"].as_array().unwrap();
    assert!(requests[0].get("error").is_none(), "the first arrives at once: {}", requests[0]);
    let error = requests[1]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("not sent: its arrival") && error.contains("request timeout (3s)"), "{error}");
    assert_eq!(record["levels"][0]["metrics"]["failed"], 1, "{text}");
}

/// A server's long streamed answer: the record keeps every event (and so every time and token count) but at
/// most a few KiB of text, and says how much it dropped.
#[test]
fn bench_keeps_bounded_text_per_request_and_says_how_much_it_dropped() {
    let words: String = (0..3000).map(|i| format!("word{i:05} ")).collect();
    let f = Fixture::new("bench-text-cap").answers(vec![("", words.clone())]);
    let (code, text, record) =
        bench_once(&f, "bench", &["--concurrency", "1", "--max-tokens", "4000"], Duration::from_secs(120));
    assert_eq!(code, Some(0), "{text}");
    let request = &record["levels"][0]["batches"][0]["requests"][0];
    let events = request["events"].as_array().unwrap();
    let kept: usize = events.iter().map(|e| e[1].as_str().unwrap().len() + e[2].as_str().unwrap().len()).sum();
    let tokens = events.iter().filter(|e| !e[1].as_str().unwrap().is_empty()).count();
    assert_eq!(tokens, 3000, "every token event is kept");
    // 4 KiB verbatim, then one character per event.
    assert!(kept <= 4096 + 3000, "{kept} bytes of text kept");
    assert_eq!(request["text_dropped"].as_u64(), Some((words.len() - kept) as u64), "{request}");
    assert!(words.starts_with(&events.iter().map(|e| e[1].as_str().unwrap()).take(400).collect::<String>()));
    assert_eq!(record["levels"][0]["metrics"]["output_tokens"], 3000, "{text}");
}

/// `plan --since` runs git; a git that never ends (a lock, a hung filesystem) is killed with what it started at
/// the helper deadline (20 s), and plan says so.
#[test]
fn plan_kills_a_git_that_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("gauntlet-test-git-hang-{}", std::process::id());
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // Not exec: the shell waits for its child, which holds git's output pipes too.
    let script = format!(
        "#!/bin/sh\n{} --sleeper --tag {tag} --lifetime-s 120\n",
        workspace_bin("gauntlet-fake-server").display()
    );
    let git = bin.join("git");
    std::fs::write(&git, script).unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let manifest = dir.path().join("m.toml");
    std::fs::write(
        &manifest,
        "version = 1\n[plan.profiles]\np = [\"x/\"]\n[profiles.p]\nbase_url = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let args = ["plan", "--manifest", manifest.to_str().unwrap(), "--since", "HEAD~1", "--repo", "."];
    let started = std::time::Instant::now();
    let out = gauntlet(&args, &[("PATH", &path)], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("did not finish within 20s"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(40), "took {:?}", started.elapsed());
    assert_no_survivors(&tag);
}
