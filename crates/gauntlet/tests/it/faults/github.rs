//! Output for GitHub Actions: workflow annotations and the step summary.

use super::*;

#[test]
fn github_annotations_and_step_summary() {
    let f = Fixture::new("github").fault(&["--fault", "http500", "--fault-on", "beta"]);
    let manifest = f.write();
    let out = f.path().join("out");
    let summary = f.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    crate::common::isolate(&mut cmd, &[], &scratch);
    cmd.args(["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let output = cmd.output().unwrap();
    let run = finish(output, &out);
    assert_eq!(run.code, 1, "{}", run.explain());
    let first = run.stdout.lines().next().unwrap_or_default().to_owned();
    assert!(first.starts_with("::error title=gauntlet test request-error%3A beta::HTTP 500"), "{}", run.stdout);
    assert!(run.stdout.contains("::warning title=gauntlet test no-baseline::"), "{}", run.stdout);
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("earlier step\n# gauntlet test: FAIL"), "{text}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("<testcase name=\"beta\" classname=\"gauntlet.test\""), "{junit}");
    assert!(junit.contains("<error message=\"HTTP 500"), "{junit}");
    assert_eq!(junit.matches("<testcase ").count(), 5, "one test case per suite case");
    assert_no_survivors(&f.tag);
}
