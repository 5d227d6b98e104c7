//! `gauntlet compare`: its exit code follows the losslessness verdict.

use super::*;

#[test]
fn compare_exits_by_its_losslessness_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, hello: &str| {
        let run = serde_json::json!({"suite": {"digest": "s"}, "cases": [{"id": "hello", "observed": hello}]});
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("run.json"), run.to_string()).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (a, a2, b, noisy) =
        (write("a", "Hi there"), write("a2", "Hi there"), write("b", "Hi where"), write("n", "Hey"));
    let code = |args: &[&str]| gauntlet(args, &[], Duration::from_secs(30)).status.code();
    assert_eq!(code(&["compare", &a, &a2, "--control", &a2]), Some(0));
    assert_eq!(code(&["compare", &a, &b, "--control", &a2]), Some(1));
    assert_eq!(code(&["compare", &a, &b, "--control", &noisy]), Some(4));
    assert_eq!(code(&["compare", &a, "/nonexistent/run.json"]), Some(2));
    let o = gauntlet(&["compare", &a, &b, "--control", &a2], &[], Duration::from_secs(30));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("differs        hello at char 3") && text.contains("lossless: FAIL (with a control run)"),
        "{text}"
    );
}
