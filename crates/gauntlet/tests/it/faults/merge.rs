//! `gauntlet report --merge`: shards checked against the CI matrix, and the merged outputs.

use super::*;

/// `report --merge` over a matrix: every profile the plan emitted must report; the summary goes to stdout, the
/// step summary and files, and the exit code is the merged verdict's.
#[test]
fn report_merge_checks_the_matrix_and_writes_its_outputs() {
    let f = Fixture::new("merge");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let matrix = f.path().join("matrix.json");
    let out = f.path().join("merged");
    let step_summary = f.path().join("step-summary.md");
    let shards = f.path().join("out");
    let merge = |matrix_json: &str| {
        std::fs::write(&matrix, matrix_json).unwrap();
        let args = [
            "report",
            "--merge",
            shards.to_str().unwrap(),
            "--matrix",
            matrix.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--artifact",
            "gauntlet-{profile}",
        ];
        let env = [("GITHUB_STEP_SUMMARY", step_summary.to_str().unwrap()), ("GITHUB_ACTIONS", "true")];
        let o = gauntlet(&args, &env, Duration::from_secs(30));
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, stdout) = merge(r#"{"include":[{"profile":"test"},{"profile":"gpu-big"}]}"#);
    assert_eq!(code, Some(1), "a shard missing from the matrix fails: {stdout}");
    assert!(stdout.contains("::error title=gauntlet merge::no shard for profile `gpu-big`"), "{stdout}");
    assert!(stdout.contains("| gpu-big | fail | missing"), "{stdout}");
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("merged.json")).unwrap()).unwrap();
    assert_eq!(merged["verdict"], "fail");
    assert!(std::fs::read_to_string(out.join("junit.xml")).unwrap().contains("name=\"gpu-big\""));

    let (code, stdout) = merge(r#"{"include":[{"profile":"test"}]}"#);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("| test | warn |") && stdout.contains("artifact `gauntlet-test`"), "{stdout}");
    assert!(stdout.contains("- **worst finding** (warn, `test`): no-baseline"), "{stdout}");
    assert_eq!(std::fs::read_to_string(out.join("summary.md")).unwrap(), stdout);
    let appended = std::fs::read_to_string(&step_summary).unwrap();
    assert_eq!(appended.matches("## gauntlet: ").count(), 2, "each merge appends its summary: {appended}");

    let (code, _) = merge(r#"{"profiles": ["test"]}"#);
    assert_eq!(code, Some(2), "a matrix of another shape is bad input");
}
