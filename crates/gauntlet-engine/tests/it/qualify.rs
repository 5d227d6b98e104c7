//! Qualification's pure parts: the word-problem generator, answer extraction, the drift verdict, stage selection.

use gauntlet_engine::qualify::drift::{Limits, Sample, evaluate};
use gauntlet_engine::qualify::parse_stages;
use gauntlet_engine::qualify::words::{Extraction, arithmetic, extract_answer, is_correct, read_gsm8k};

/// Recomputes a generated problem's answer from its text alone: the numbers in the order they appear, combined as
/// the template's wording says. Independent of the generator's own arithmetic.
fn answer_from_text(kind: &str, question: &str) -> i64 {
    let n: Vec<i64> =
        regex::Regex::new(r"\d+").unwrap().find_iter(question).map(|m| m.as_str().parse().unwrap()).collect();
    match kind {
        "add" => n[0] + n[1],
        "take" => n[0] - n[1],
        "groups" => n[0] * n[1],
        "share" => {
            assert_eq!(n[0] % n[1], 0, "shares evenly: {question}");
            n[0] / n[1]
        }
        "packs" => n[0] + n[1] * n[2],
        "change" => n[2] - n[0] * n[1],
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn generated_answers_agree_with_an_independent_reading_of_the_text() {
    let problems = arithmetic(7, 600);
    let mut kinds = std::collections::BTreeSet::new();
    for p in &problems {
        let want = answer_from_text(&p.kind, &p.question);
        assert!(want >= 0, "{p:?}");
        assert_eq!(p.gold, want.to_string(), "{p:?}");
        kinds.insert(p.kind.clone());
    }
    assert_eq!(kinds.len(), 6, "every template is used: {kinds:?}");
}

#[test]
fn the_set_is_stable_across_runs_and_pinned_for_its_version() {
    assert_eq!(arithmetic(1, 50), arithmetic(1, 50));
    assert_ne!(arithmetic(1, 20), arithmetic(2, 20), "the seed matters");
    assert_eq!(arithmetic(1, 10)[..], arithmetic(1, 20)[..10], "a longer set extends a shorter one");
    // Changing templates, names or ranges must bump ARITH_VERSION: this pins v1's first problems.
    let text = serde_json::to_string(&arithmetic(1, 20)).unwrap();
    let digest = gauntlet_engine::util::sha256_hex(text.as_bytes());
    assert_eq!(digest, PINNED_ARITH_V1_SEED1_20, "arith-v1 changed; bump ARITH_VERSION");
}

const PINNED_ARITH_V1_SEED1_20: &str = "8268420db5f72d3e0612018560368fbb6fe2c104fa4331140ebd45ae47d47331";

#[test]
fn answer_extraction_follows_the_usual_order() {
    let table: &[(&str, Option<(&str, Extraction)>)] = &[
        ("Adding them gives 12. #### 12", Some(("12", Extraction::Marker))),
        ("#### 1,234", Some(("1234", Extraction::Marker))),
        ("So the result is \\boxed{17}.", Some(("17", Extraction::Boxed))),
        ("The answer is 42.", Some(("42", Extraction::AnswerIs))),
        ("the final answer is: $1,200.50", Some(("1200.5", Extraction::AnswerIs))),
        ("She has **12** apples left.", Some(("12", Extraction::Bold))),
        ("3 + 4 = 7", Some(("7", Extraction::LastNumber))),
        ("It drops to -3 degrees.", Some(("-3", Extraction::LastNumber))),
        ("#### 12 but the answer is 13", Some(("12", Extraction::Marker))),
        ("**5** then \\boxed{6}", Some(("6", Extraction::Boxed))),
        ("<think>#### 5</think>In the end she has 8.", Some(("8", Extraction::LastNumber))),
        ("<think>a</think><think>b 4</think>The answer is 9", Some(("9", Extraction::AnswerIs))),
        ("I cannot tell.", None),
        ("<think>it is 5</think>", None),
    ];
    for (reply, want) in table {
        let got = extract_answer(reply);
        let got = got.as_ref().map(|(n, how)| (n.as_str(), *how));
        assert_eq!(got, *want, "{reply:?}");
    }
    assert!(is_correct("... #### 42.", "42"));
    assert!(is_correct("The answer is 7.0", "7"));
    assert!(!is_correct("The answer is 41", "42"));
    assert!(!is_correct("", "42"));
}

#[test]
fn gsm8k_jsonl_is_read_and_bad_lines_are_named() {
    let good = "{\"question\": \"Q1?\", \"answer\": \"2 + 2 = 4\\n#### 4\"}\n\n{\"question\": \"Q2?\", \"answer\": \"#### 1,000\"}\n";
    let set = read_gsm8k(good).unwrap();
    assert_eq!(set.len(), 2);
    assert_eq!((set[0].gold.as_str(), set[1].gold.as_str()), ("4", "1000"));
    assert_eq!(set[1].id, "line-3");
    let bad =
        "{\"question\": \"Q\", \"answer\": \"no marker\"}\nnot json\n{\"question\": true, \"answer\": \"#### 1\"}\n";
    let errors = read_gsm8k(bad).unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("line 1:") && errors[0].contains("####"), "{errors:?}");
    assert!(errors[1].starts_with("line 2: not JSON"), "{errors:?}");
    assert!(errors[2].starts_with("line 3:"), "{errors:?}");
    assert!(read_gsm8k("\n").is_err(), "an empty set is no evidence");
}

fn samples(rss_mib: impl Fn(usize) -> f64, health_ms: impl Fn(usize) -> f64, n: usize) -> Vec<Sample> {
    (0..n)
        .map(|i| Sample {
            t: i as f64 * 0.5,
            at: String::new(),
            rss_bytes: Some((rss_mib(i) * 1024.0 * 1024.0) as u64),
            health_ok: true,
            health_seconds: Some(health_ms(i) / 1e3),
            gpu_memory_bytes: None,
            error: None,
        })
        .collect()
}

fn limits() -> Limits {
    Limits {
        window: 4,
        max_rss_growth_mib: 64.0,
        max_health_latency_growth: 1.0,
        health_latency_slack_seconds: 0.002,
        max_gpu_memory_growth_mib: None,
        require_rss: true,
    }
}

#[test]
fn drift_compares_the_early_window_with_the_last() {
    // Warm-up (first window) may grow freely; steady afterwards.
    let flat = samples(|i| if i < 4 { 100.0 + 50.0 * i as f64 } else { 300.0 }, |_| 2.0, 20);
    let d = evaluate(&flat, &limits());
    assert_eq!(d.status, "pass", "{:?}", d.failures);
    assert_eq!(d.rss_growth_mib, Some(0.0));
    assert_eq!(d.health_latency_growth, Some(0.0));

    let leak = samples(|i| 300.0 + 10.0 * i as f64, |_| 2.0, 20);
    let d = evaluate(&leak, &limits());
    // early = median of samples 4..8 = 355; late = median of 16..20 = 475.
    assert_eq!(d.rss_growth_mib, Some(120.0));
    assert_eq!(d.status, "fail");
    assert!(d.failures[0].contains("RSS grew 120.0 MiB"), "{:?}", d.failures);

    let slow = samples(|_| 300.0, |i| if i < 12 { 2.0 } else { 5.0 }, 20);
    let d = evaluate(&slow, &limits());
    assert_eq!(d.health_latency_growth, Some(1.5));
    assert!(d.failures.iter().any(|f| f.contains("health latency grew 150%")), "{:?}", d.failures);
    // The same relative growth within the absolute slack (3 ms < 5 ms) is noise.
    let d = evaluate(&slow, &Limits { health_latency_slack_seconds: 0.005, ..limits() });
    assert_eq!(d.status, "pass", "{:?}", d.failures);

    let mut sick = samples(|_| 300.0, |_| 2.0, 20);
    sick[9].health_ok = false;
    sick[9].health_seconds = None;
    sick[9].error = Some("connection refused".into());
    let d = evaluate(&sick, &limits());
    assert!(d.failures.iter().any(|f| f.contains("1 health probe(s) failed") && f.contains("connection refused")));

    let d = evaluate(&flat[..11], &limits());
    assert_eq!(d.status, "fail");
    assert!(d.failures[0].contains("at least 12"), "{:?}", d.failures);

    let mut blind = samples(|_| 300.0, |_| 2.0, 20);
    blind[17].rss_bytes = None;
    assert!(evaluate(&blind, &limits()).failures.iter().any(|f| f.contains("RSS samples are missing")));
    let attached = Limits { require_rss: false, ..limits() };
    assert_eq!(evaluate(&blind, &attached).status, "pass");
}

#[test]
fn stage_selection_always_keeps_provenance_and_evidence() {
    assert_eq!(parse_stages("R1,r3").unwrap(), ["R0", "R1", "R3", "R7"]);
    assert_eq!(parse_stages("").unwrap(), ["R0", "R7"]);
    let e = parse_stages("R1,R9").unwrap_err();
    assert_eq!(e.given, "R9");
    assert!(e.to_string().starts_with("unknown stage `R9` (stages are R0, R1, "), "{e}");
}
