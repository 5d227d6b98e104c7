//! Stream faults: each broken answer shape (no `[DONE]`, malformed JSON, HTTP 500, wrong content type, too large)
//! is an error finding of its case.

use super::*;

fn single_fault(name: &str, fault: &str, case: &str, expect: &str) {
    let f = Fixture::new(name).fault(&["--fault", fault, "--fault-on", case]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    assert_eq!(run.case(case)["status"], "error", "{}", run.explain());
    let err = run.case(case)["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains(expect), "{err}");
    let finding = run.findings("request-error");
    assert_eq!(finding.len(), 1, "{finding:?}");
    assert_eq!(finding[0]["case"], case);
}

#[test]
fn stream_without_done_is_an_error() {
    single_fault("no-done", "no-done", "gamma", "stream ended without `data: [DONE]`");
}

#[test]
fn malformed_json_chunk_is_an_error() {
    single_fault("malformed", "malformed", "gamma", "is not JSON");
}

#[test]
fn http_500_is_an_error() {
    single_fault("http500", "http500", "beta", "HTTP 500");
}

#[test]
fn wrong_content_type_is_an_error() {
    single_fault("wrong-ct", "wrong-content-type", "beta", "wrong content type `text/html`");
    single_fault("wrong-ct-stream", "wrong-content-type", "gamma", "wrong content type `text/plain`");
}

#[test]
fn oversized_response_is_an_error() {
    single_fault("oversized", "oversized", "delta", "response larger than");
}
