//! `gauntlet plan`: changed paths of a real git repository mapped to the profiles they affect.

use super::*;

#[test]
fn plan_maps_changed_paths_of_a_real_git_repository() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let git = |args: &[&str]| git_in(repo, args);
    git(&["init", "-q"]);
    std::fs::create_dir_all(repo.join("models/qwen")).unwrap();
    std::fs::write(repo.join("models/qwen/a.cu"), "1").unwrap();
    std::fs::write(repo.join("README.md"), "1").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    std::fs::write(repo.join("models/qwen/a.cu"), "2").unwrap();
    git(&["commit", "-qam", "two"]);
    let manifest = repo.join("m.toml");
    std::fs::write(
        &manifest,
        "version = 1\n[plan]\nshared = [\"core/\"]\n[plan.profiles]\nqwen = [\"models/qwen/\"]\nds4 = [\"models/ds4/\"]\n\
         [profiles.qwen]\nbase_url = \"http://127.0.0.1:1\"\ndevice = \"nvidia:0\"\nrunner = [\"self-hosted\", \"h200\"]\n\
         [profiles.ds4]\nbase_url = \"http://127.0.0.1:2\"\ndevice = \"amd:0\"\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let r = repo.to_str().unwrap();
    let out = gauntlet(&["plan", "--manifest", m, "--since", "HEAD~1", "--repo", r], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "qwen\n");
    let out = gauntlet(
        &["plan", "--manifest", m, "--since", "HEAD~1", "--repo", r, "--format", "github-matrix"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"include\":[{\"profile\":\"qwen\",\"runner\":[\"self-hosted\",\"h200\"]}]}\n",
        "the runner labels come from the manifest"
    );
    // A manual dispatch names profiles (or all); GPU profiles without `runner` get the vendor's self-hosted label.
    let out = gauntlet(
        &["plan", "--manifest", m, "--profiles", "ds4", "--format", "github-output"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "matrix={\"include\":[{\"profile\":\"ds4\",\"runner\":[\"self-hosted\",\"amd\"]}]}\ncount=1\n"
    );
    let out = gauntlet(&["plan", "--manifest", m, "--all"], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ds4\nqwen\n");
    let out = gauntlet(&["plan", "--manifest", m, "--profiles", "ds4,mistral"], &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no profile `mistral`"));
    std::fs::write(repo.join("changed.txt"), "README.md\n").unwrap();
    let cf = repo.join("changed.txt");
    let out =
        gauntlet(&["plan", "--manifest", m, "--changed-files", cf.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let out = gauntlet(
        &["plan", "--manifest", m, "--changed-files", cf.to_str().unwrap(), "--fallback-all"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ds4\nqwen\n");
}
