//! Stream faults: each broken answer shape (no `[DONE]`, malformed JSON, HTTP 500, wrong content type, too large)
//! is an error finding of its case; a refusal (HTTP 4xx) is the case's failure.

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

/// A server that read a request and refused it (HTTP 4xx: here llama.cpp's context-size refusal) has answered:
/// that case fails with the server's message, no request error is raised, and a declared expected failure that
/// gets one stays expected.
#[test]
fn http_400_is_the_cases_failure_with_the_servers_message() {
    let fault = ["--fault", "http400", "--fault-on", "beta"];
    let run = Fixture::new("http400").fault(&fault).run(&[]);
    // One failing case without a baseline is a warn (a request error would have failed the gate: see HTTP 500).
    assert_eq!((run.code, run.verdict()), (0, "warn"), "{}", run.explain());
    assert_eq!(run.case("beta")["status"], "fail", "{}", run.explain());
    let detail = run.case("beta")["checks"][0]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("HTTP 400") && detail.contains("exceed_context_size_error"), "{detail}");
    assert!(run.findings("request-error").is_empty(), "{}", run.explain());

    let expected = Fixture::new("http400-expected").fault(&fault).profile("expected_failures = [\"beta\"]").run(&[]);
    assert_eq!(expected.code, 0, "{}", expected.explain());
    assert_eq!(expected.case("beta")["status"], "fail", "{}", expected.explain());
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
