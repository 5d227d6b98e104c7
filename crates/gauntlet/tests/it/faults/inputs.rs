//! Bad input refused before a server starts: a binary that is not executable, a missing model file, a model
//! whose sha256 does not match.

use super::*;

#[test]
fn binary_not_executable_is_bad_input() {
    let mut f = Fixture::new("noexec");
    f.executable = false;
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("profiles.test") || run.stderr.contains("servers.fake.binary"), "{}", run.explain());
    assert!(run.stderr.contains("is not executable"), "{}", run.explain());
}

#[test]
fn missing_model_file_is_bad_input() {
    let mut f = Fixture::new("nomodel");
    f.model = false;
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("models.tiny.path: model file"), "{}", run.explain());
    assert!(run.stderr.contains("does not exist"), "{}", run.explain());
}

#[test]
fn wrong_model_sha256_is_bad_input() {
    let f = Fixture::new("sha").profile("");
    let manifest = f.write();
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "path = \"models/tiny.gguf\"",
        &format!("path = \"models/tiny.gguf\"\nsha256 = \"{}\"", "0".repeat(64)),
    );
    std::fs::write(&manifest, text).unwrap();
    let out = f.path().join("out");
    let output = gauntlet(
        &["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
        Duration::from_secs(30),
    );
    let run = finish(output, &out);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("the manifest says 0000"), "{}", run.explain());
    assert_no_survivors(&f.tag);
}
