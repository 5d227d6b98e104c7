//! Verdict rules: one regression warns and two fail, a pass rate under half fails, text drift names its first
//! differing character, slower decode or load warns, a suite over its budget fails.

use super::*;

#[test]
fn one_regression_warns_two_fail() {
    let f = Fixture::new("regress");
    let baseline = f.baseline();
    let mut answers = good_answers();
    answers[2].1 = answer("nothing");
    let one = f.answers(answers.clone());
    let run = one.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    let regressions = run.findings("regression");
    assert_eq!(regressions.len(), 1);
    assert_eq!(regressions[0]["case"], "beta");
    assert_eq!(regressions[0]["severity"], "warn");

    answers[4].1 = answer("nothing");
    let two = one.answers(answers);
    let run = two.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let regressions = run.findings("regression");
    assert_eq!(regressions.len(), 2);
    assert!(regressions.iter().all(|r| r["severity"] == "fail"));
}

/// A case that failed on the baseline and fails the same way now (the same checks failing) is a note: an unchanged
/// server that always failed some cases passes. The first run offers them as an `expected_failures` line. A case
/// failing in a new way (a check that passed on the baseline fails now) still warns.
#[test]
fn unchanged_failures_are_notes_and_a_new_way_of_failing_warns() {
    // epsilon has two checks: its one-word answer passes `contains` and fails `min_words`.
    let epsilon = "\n[[cases]]\nid = \"epsilon\"\nmax_tokens = 64\nmessages = [{ role = \"user\", content = \"Say \
                   epsilon.\" }]\ncheck = { contains = [\"epsilon\"], min_words = 10 }\n";
    let mut answers = good_answers();
    answers[2].1 = answer("nothing");
    answers.push(("Say epsilon.", "epsilon".into()));
    let f = Fixture::new("known-fail").cases(epsilon).answers(answers.clone());
    let baseline = f.baseline();
    let first = std::fs::read_to_string(f.path().join("baseline-out/report.md")).unwrap();
    assert!(first.contains("## Expected failures"), "{first}");
    assert!(first.contains("expected_failures = [\"beta\", \"epsilon\"]"), "{first}");

    let run = f.run(&["--baseline", &baseline]);
    assert_eq!((run.code, run.verdict()), (0, "pass"), "{}", run.explain());
    let noted = run.findings("known-failure");
    let cases: Vec<_> = noted.iter().map(|n| (n["case"].as_str().unwrap(), n["severity"].as_str().unwrap())).collect();
    assert_eq!(cases, [("beta", "info"), ("epsilon", "info")], "{}", run.explain());
    assert_eq!(
        (run.case("beta")["status"].as_str(), run.case("epsilon")["status"].as_str()),
        (Some("fail"), Some("fail"))
    );
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    let notes = &report[report.find("## Notes").expect("a Notes section")..];
    assert!(notes.contains("**known-failure** `beta`") && notes.contains("**known-failure** `epsilon`"), "{report}");
    assert!(!report.contains("## Expected failures"), "offered only without a baseline: {report}");

    // epsilon now answers at length without its word: `contains`, which passed on the baseline, fails.
    let last = answers.len() - 1;
    answers[last].1 = answer("nothing");
    let f = f.answers(answers);
    let changed = f.run_into("changed", &["--baseline", &baseline]);
    assert_eq!((changed.code, changed.verdict()), (0, "warn"), "{}", changed.explain());
    let warned = changed.findings("failure-changed");
    assert_eq!(warned.len(), 1, "{}", changed.explain());
    assert_eq!((warned[0]["case"].as_str(), warned[0]["severity"].as_str()), (Some("epsilon"), Some("warn")));
    assert!(warned[0]["message"].as_str().unwrap().contains("contains (missing [\"epsilon\"])"), "{warned:?}");
    let noted = changed.findings("known-failure");
    assert_eq!(noted.len(), 1, "{}", changed.explain());
    assert_eq!(noted[0]["case"], "beta");
}

#[test]
fn under_half_passing_fails() {
    let wrong =
        good_answers().into_iter().map(|(k, v)| (k, if k.starts_with("__") { v } else { answer("nothing") })).collect();
    let f = Fixture::new("pass-rate").answers(wrong);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let rate = run.findings("pass-rate");
    assert_eq!(rate.len(), 1, "{}", run.explain());
    assert!(rate[0]["message"].as_str().unwrap().starts_with("0 of 4 cases pass"), "{rate:?}");
}

#[test]
fn text_drift_warns_with_the_first_differing_character() {
    let f = Fixture::new("drift");
    let baseline = f.baseline();
    let mut answers = good_answers();
    answers[1].1 = answers[1].1.replacen("and so on", "and so forth", 1);
    let f = f.answers(answers);
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn");
    let drift = run.findings("text-drift");
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0]["case"], "alpha");
    // "alpha and so " is 13 characters; the 14th differs ("o" of "on" vs "f" of "forth").
    // Both records carry tokens: the first divergent one is named, with its gap in the baseline's alternatives.
    // The shared tokens (the fake gives every one the same logprob) moved by nothing: the flip is far outside.
    let token = "token 3 ('on ' vs 'forth ', gap > 4.95 nats, not in the baseline's top 5, swing > 9.90 nats; shared \
                 tokens moved ≤ 0.00 nats over 126 tokens (median 0.000): behaviour change; checks unchanged)";
    assert_eq!(drift[0]["message"], format!("text differs from the baseline at char 13, {token}"));
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    // In Markdown the `>` of the lower bound is escaped like any server-adjacent text.
    assert!(report.contains(&format!("differs at {}", token.replace('>', "&gt;"))), "{report}");
}

#[test]
fn decode_twenty_percent_slower_warns() {
    let with_delay = |ms: &str| {
        let mut a = good_answers();
        a.push(("__token_delay_ms", ms.into()));
        a
    };
    let f = Fixture::new("slow-decode").answers(with_delay("10"));
    let baseline = f.baseline();
    let f = f.answers(with_delay("13"));
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    assert!(run.has_finding("slow-decode"), "{}", run.explain());
    assert!(!run.has_finding("text-drift"));
    // Both runs carry the CPU account of every answered case, and the decode was judged on it: a server that sleeps
    // between its tokens is slower on its own CPU clock too, however busy the machine (the correction takes out
    // only the wait for other processes' CPU).
    let record = run.record.as_ref().unwrap();
    let check = &record["decode"]["speed_check"];
    let answered = record["cases"].as_array().unwrap().iter().filter(|c| c["answer"].is_object()).count();
    assert_eq!(check["cases"].as_array().map(Vec::len), Some(answered), "{check}");
    assert!(check["cases"].as_array().unwrap().iter().all(|c| c["factor"].as_f64().unwrap() >= 1.0), "{check}");
    let contention = check["contention"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&contention), "{check}");
    let judgement = &check["judgement"];
    assert_eq!((judgement["judged"].as_bool(), judgement["corrected"].as_bool()), (Some(true), Some(true)), "{check}");
    let slow = record["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "slow-decode").unwrap();
    assert!(slow["message"].as_str().unwrap().contains("corrected onto the server's CPU clock"), "{slow}");
}

#[test]
fn load_twice_as_slow_warns() {
    let with_delay = |ms: &str| {
        let mut a = good_answers();
        a.push(("__load_delay_ms", ms.into()));
        a
    };
    let f = Fixture::new("slow-load").answers(with_delay("400"));
    let baseline = f.baseline();
    let f = f.answers(with_delay("1200"));
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    let slow = run.findings("slow-load");
    assert_eq!(slow.len(), 1, "{}", run.explain());
}

#[test]
fn suite_over_budget_fails() {
    let f = Fixture::new("budget").fault(&["--token-delay-ms", "25"]).profile("suite_budget = \"2s\"");
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert!(run.has_finding("over-budget"), "{}", run.explain());
    let skipped = run.record.as_ref().unwrap()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["skip_reason"] == "suite budget spent")
        .count();
    assert!(skipped >= 1, "{}", run.explain());
    assert_eq!(run.record.as_ref().unwrap()["suite"]["over_budget"], true);
}
