//! `compare A B`: losslessness per case, with and without a control run.

use gauntlet_engine::compare::lossless::{LosslessError, lossless};
use serde_json::{Value, json};

fn run(answers: &[(&str, Option<&str>)]) -> Value {
    let cases: Vec<Value> = answers.iter().map(|(id, text)| json!({"id": id, "observed": text})).collect();
    json!({"suite": {"digest": "s1"}, "cases": cases})
}

#[test]
fn identical_runs_pass_and_a_difference_is_located() {
    let a = run(&[("hello", Some("Hello there")), ("math", Some("12"))]);
    let r = lossless(&a, &a.clone(), Some(&a)).unwrap();
    assert_eq!(r.verdict, "pass");
    assert!(r.cases.iter().all(|c| c.status == "identical"));

    let b = run(&[("hello", Some("Hello here")), ("math", Some("12"))]);
    let r = lossless(&a, &b, Some(&a)).unwrap();
    assert_eq!(r.verdict, "fail");
    assert_eq!((r.cases[0].status.as_str(), r.cases[0].char_index), ("differs", Some(6)));
    assert_eq!(r.cases[0].control_identical, Some(true));
    assert_eq!(r.cases[1].status, "identical");

    let r = lossless(&a, &b, None).unwrap();
    assert_eq!(r.verdict, "fail");
    assert!(!r.controlled && r.cases[0].detail.contains("no control run"), "{:?}", r.cases[0]);
}

#[test]
fn a_control_that_differs_from_a_makes_the_case_inconclusive() {
    let a = run(&[("hello", Some("Hello there")), ("math", Some("12"))]);
    let a2 = run(&[("hello", Some("Hello, there")), ("math", Some("12"))]);
    let b = run(&[("hello", Some("Hello here")), ("math", Some("12"))]);
    let r = lossless(&a, &b, Some(&a2)).unwrap();
    assert_eq!(r.verdict, "inconclusive");
    assert_eq!(r.cases[0].status, "inconclusive");
    // A case B changed where the control reproduced A still fails, whatever the other cases do.
    let b2 = run(&[("hello", Some("Hello here")), ("math", Some("13"))]);
    assert_eq!(lossless(&a, &b2, Some(&a2)).unwrap().verdict, "fail");
}

/// `answer.tokens` as run.json version 6 records it: ids, each with the chosen token and one alternative.
fn tokens(ids: &[Value]) -> Value {
    let items: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "text": "t", "logprob": -0.1,
            "top": [{"id": id, "text": "t", "logprob": -0.1}, {"id": 5, "text": "u", "logprob": -2.0}]})
        })
        .collect();
    json!({"source": "ids", "count": ids.len(), "items": items})
}

#[test]
fn token_ids_locate_the_divergence_and_are_never_coerced() {
    let mut a = run(&[("t", Some("ab"))]);
    let mut b = a.clone();
    a["cases"][0]["answer"] = json!({"tokens": tokens(&[json!(1), json!(2), json!(3), json!(4)])});
    b["cases"][0]["answer"] = json!({"tokens": tokens(&[json!(1), json!(2), json!(5), json!(4)])});
    let r = lossless(&a, &b, None).unwrap();
    // Same text, other tokens (a different tokenization of the same string) is not lossless.
    assert_eq!((r.cases[0].char_index, r.cases[0].first_divergent_token), (None, Some(2)));
    assert_eq!(r.verdict, "fail");
    let d = r.cases[0].token_divergence.as_ref().unwrap();
    assert_eq!((d.baseline.id, d.run.id, d.gap_nats), (Some(3), Some(5), Some(1.9)));
    b["cases"][0]["answer"] = json!({"tokens": tokens(&[json!(1), json!(true), json!(3), json!(4)])});
    let e = lossless(&a, &b, None).unwrap_err();
    assert!(matches!(&e, LosslessError::Tokens { side: "B", case, .. } if case == "t"), "{e:?}");
    assert!(e.to_string().starts_with("B: case `t` answer.tokens is malformed: "), "{e}");
    b["cases"][0]["answer"] = json!({"tokens": "1 2 3"});
    assert!(matches!(lossless(&a, &b, None).unwrap_err(), LosslessError::Tokens { .. }));
}

#[test]
fn a_near_tie_flip_whose_checks_pass_is_drift_not_a_difference() {
    let mut a = run(&[("t", Some("x 8"))]);
    let mut b = run(&[("t", Some("x 9"))]);
    let near = |id: u64| {
        json!({"source": "ids", "count": 2, "items": [
        {"id": 1, "text": "x ", "logprob": -0.1},
        {"id": id, "text": if id == 8 { "8" } else { "9" }, "logprob": -0.70,
         "top": [{"id": 8, "text": "8", "logprob": -0.70}, {"id": 9, "text": "9", "logprob": -0.72}]}]})
    };
    a["cases"][0]["answer"] = json!({"tokens": near(8)});
    b["cases"][0]["answer"] = json!({"tokens": near(9)});
    b["cases"][0]["status"] = json!("pass");
    let r = lossless(&a, &b, None).unwrap();
    assert_eq!((r.cases[0].status.as_str(), r.cases[0].first_divergent_token), ("drift", Some(1)), "{r:?}");
    assert!(r.cases[0].detail.contains("token 1 ('8' vs '9', gap 0.02 nats: near-tie)"), "{}", r.cases[0].detail);
    assert_eq!(r.verdict, "pass");
    // The same flip in a case whose checks now fail is a difference.
    b["cases"][0]["status"] = json!("fail");
    assert_eq!(lossless(&a, &b, None).unwrap().cases[0].status, "differs");
}

/// Regression (#21, item 18): `compare` found each case of A by scanning B's (and the control's) cases, so its
/// work grew with the square of the records' answers (measured before the fix, debug build: 5,000 cases 1.4 s,
/// 10,000 7.6 s, 20,000 20 s: 2·10^7 case-id comparisons a second). At 200,000 cases, with B and the control in
/// reverse order, that is 4·10^10 comparisons, about 2,000 s: far past nextest's 10-minute limit, while the
/// indexed comparison takes seconds (most of them building the records). Long answers (200,000 characters, 100,000 tokens) stay linear too.
#[test]
fn comparing_many_cases_and_long_answers_is_linear() {
    let many: Vec<Value> = (0..200_000).map(|i| json!({"id": format!("c{i}"), "observed": "x"})).collect();
    let (mut a, mut b) = (run(&[]), run(&[]));
    b["cases"] = json!(many.iter().rev().cloned().collect::<Vec<_>>());
    a["cases"] = json!(many);
    let r = lossless(&a, &b, Some(&b)).unwrap();
    assert_eq!((r.verdict.as_str(), r.cases.len()), ("pass", 200_000));

    let text = "ab".repeat(100_000);
    let items: Vec<Value> = (0..100_000u64).map(|i| json!({"id": i % 49_152, "text": "t"})).collect();
    let mut a = run(&[]);
    a["cases"] = json!([{"id": "long", "observed": text,
        "answer": {"tokens": {"source": "ids", "count": items.len(), "items": items}}}]);
    let mut b = a.clone();
    b["cases"][0]["observed"] = json!(format!("{}c", &text[..text.len() - 1]));
    b["cases"][0]["answer"]["tokens"]["items"][99_999]["id"] = json!(60_000);
    let r = lossless(&a, &b, None).unwrap();
    assert_eq!((r.cases[0].char_index, r.cases[0].first_divergent_token), (Some(199_999), Some(99_999)));
}

#[test]
fn missing_answers_fail_and_other_suites_are_refused() {
    let a = run(&[("x", Some("1")), ("y", Some("2"))]);
    let b = run(&[("x", None)]);
    let r = lossless(&a, &b, None).unwrap();
    assert_eq!(r.verdict, "fail");
    assert_eq!((r.cases[0].status.as_str(), r.cases[0].detail.as_str()), ("missing", "B has no answer for it"));
    assert_eq!((r.cases[1].status.as_str(), r.cases[1].detail.as_str()), ("missing", "B has no such case"));
    let mut other = a.clone();
    other["suite"]["digest"] = "s2".into();
    assert!(matches!(lossless(&a, &other, None).unwrap_err(), LosslessError::Suites { .. }));
    let e = lossless(&json!({"suite": {"digest": "s1"}}), &a, None).unwrap_err();
    assert!(matches!(e, LosslessError::NoCases { side: "A" }), "{e:?}");
}

/// Each way two records cannot be compared is its variant, with the side and the case, in the words `compare`
/// has always printed.
#[test]
fn records_that_cannot_be_compared_are_the_variant_of_why() {
    let a = run(&[("x", Some("a"))]);
    let e = lossless(&a, &json!({"suite": {"digest": "s1"}}), None).unwrap_err();
    assert!(matches!(e, LosslessError::NoCases { side: "B" }), "{e:?}");
    assert_eq!(e.to_string(), "B: no `cases` array: not a gauntlet run record");
    let e = lossless(&a, &json!({"suite": {"digest": "s1"}, "cases": [{"observed": "a"}]}), None).unwrap_err();
    assert!(matches!(e, LosslessError::NoId { side: "B", index: 0 }), "{e:?}");
    assert_eq!(e.to_string(), "B: cases[0] has no string `id`");
    let mut b = a.clone();
    b["cases"][0]["answer"] = json!({"tokens": "1 2 3"});
    let e = lossless(&a, &b, None).unwrap_err();
    let LosslessError::Tokens { side: "B", case, source } = &e else { panic!("{e:?}") };
    assert_eq!(case, "x");
    assert_eq!(e.to_string(), format!("B: case `x` answer.tokens is malformed: {source}"));
    let mut c = a.clone();
    c["cases"][0]["observed"] = json!(7);
    let e = lossless(&a, &a, Some(&c)).unwrap_err();
    assert!(
        matches!(&e, LosslessError::Observed { side: "control", case, found } if case == "x" && *found == 7),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "control: case `x` observed is 7, not a string");
    let mut other = a.clone();
    other["suite"]["digest"] = "s2".into();
    let e = lossless(&a, &other, None).unwrap_err();
    assert!(matches!(&e, LosslessError::Suites { a: x, b: y } if *x == "s1" && *y == "s2"), "{e:?}");
    assert_eq!(e.to_string(), "A and B ran different suites (\"s1\" and \"s2\"): their answers cannot be compared");
    let e = lossless(&a, &a, Some(&other)).unwrap_err();
    assert!(matches!(e, LosslessError::ControlSuite), "{e:?}");
    assert_eq!(e.to_string(), "the control ran another suite than A");
}
