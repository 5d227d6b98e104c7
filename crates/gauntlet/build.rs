//! Stamps the git commit gauntlet is built from into `gauntlet --version` (`unknown` outside a git checkout, e.g.
//! when built from a source archive; `$GAUNTLET_GIT_COMMIT` at build time overrides it).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GAUNTLET_GIT_COMMIT");
    let commit = std::env::var("GAUNTLET_GIT_COMMIT").ok().filter(|c| !c.is_empty()).or_else(git_commit);
    println!("cargo:rustc-env=GAUNTLET_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}

fn git_commit() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    // Rebuild when HEAD moves: HEAD itself, the branch it points to, and packed refs.
    let git_dir = Command::new("git").args(["rev-parse", "--git-dir"]).output().ok()?;
    let git_dir = Path::new(String::from_utf8_lossy(&git_dir.stdout).trim()).to_path_buf();
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    println!("cargo:rerun-if-changed={}", git_dir.join("packed-refs").display());
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(reference) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed={}", git_dir.join(reference).display());
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
