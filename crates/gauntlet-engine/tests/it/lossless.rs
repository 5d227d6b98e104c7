//! `compare A B`: losslessness per case, with and without a control run.

use gauntlet_engine::compare::lossless::lossless;
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

#[test]
fn token_ids_locate_the_divergence_and_are_never_coerced() {
    let mut a = run(&[("t", Some("ab"))]);
    let mut b = a.clone();
    a["cases"][0]["answer"] = json!({"token_ids": [1, 2, 3, 4]});
    b["cases"][0]["answer"] = json!({"token_ids": [1, 2, 5, 4]});
    let r = lossless(&a, &b, None).unwrap();
    // Same text, other tokens (a different tokenization of the same string) is not lossless.
    assert_eq!((r.cases[0].char_index, r.cases[0].token_index), (None, Some(2)));
    assert_eq!(r.verdict, "fail");
    b["cases"][0]["answer"] = json!({"token_ids": [1, true, 3, 4]});
    let e = lossless(&a, &b, None).unwrap_err();
    assert_eq!(e, "B: case `t` token_ids[1] is a boolean, not a token id");
    b["cases"][0]["answer"] = json!({"token_ids": "1 2 3"});
    assert!(lossless(&a, &b, None).unwrap_err().contains("not an array"));
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
    assert!(lossless(&a, &other, None).unwrap_err().contains("different suites"));
    assert!(lossless(&json!({"suite": {"digest": "s1"}}), &a, None).unwrap_err().contains("no `cases` array"));
}
