//! The skip cache: a hit skips an unchanged run, a miss runs it, a warn is never remembered.

use super::*;

/// Skip-cache: a clean pass on an unchanged source tree is reused without starting the server and says so; an
/// edited tree or `--no-cache` runs again; a warn is never remembered.
#[test]
fn skip_cache_hit_miss_and_warn_not_cached() {
    // Speed is not what this test is about, and a busy 2-core runner can slow the fake server's pacing past the
    // 15 % speed warning, which would (rightly) not be cached; the speed checks have tests of their own.
    let f = Fixture::new("cache").profile("verdict = { decode_ratio_warn = 0.0, load_ratio_warn = 1000.0 }");
    let baseline = f.baseline();
    let manifest = f.write();
    let src = f.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("kernel.cu"), "v1").unwrap();
    git_in(&src, &["init", "-q"]);
    git_in(&src, &["add", "."]);
    git_in(&src, &["commit", "-qm", "one"]);
    let home = f.path().join("home");
    let cache = home.join("skip-cache");
    let entries = || std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    let gate = |out: &str, extra: &[&str]| -> Run {
        let out = f.path().join(out);
        let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(&["--source", src.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let output = gauntlet(&args, &[("GAUNTLET_HOME", home.to_str().unwrap())], Duration::from_secs(90));
        let run = finish(output, &out);
        assert_no_survivors(&f.tag);
        run
    };
    let with_baseline = ["--baseline", baseline.as_str()];

    let first = gate("first", &with_baseline);
    assert_eq!((first.code, first.verdict()), (0, "pass"), "{}", first.explain());
    assert_eq!(entries(), 1, "a clean pass is remembered");

    let hit = gate("hit", &with_baseline);
    assert_eq!(hit.code, 0, "{}", hit.explain());
    // A hit starts nothing; with --out it puts the remembered evidence there, marked as reused, so that a CI
    // merge finds the shard.
    let remembered = hit.record.as_ref().expect("the remembered run.json");
    assert_eq!(remembered["started_at"], first.record.as_ref().unwrap()["started_at"], "{}", hit.explain());
    assert!(hit.out.join("reused.json").is_file() && !hit.out.join("server.log").exists(), "{}", hit.explain());
    let merged = gauntlet(&["report", "--merge", hit.out.to_str().unwrap()], &[], Duration::from_secs(30));
    let summary = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(0), "{summary}");
    assert!(summary.contains("; reused the pass of 20"), "{summary}");
    assert!(hit.stdout.starts_with("# gauntlet test: PASS"), "the remembered report is printed: {}", hit.stdout);
    assert!(hit.stdout.contains("reused the pass of"), "{}", hit.stdout);
    assert!(hit.stdout.contains("same source tree, identity, model file, runtime, baseline"), "{}", hit.stdout);

    let forced = gate("forced", &["--baseline", baseline.as_str(), "--no-cache"]);
    assert_eq!((forced.code, forced.verdict()), (0, "pass"), "--no-cache runs: {}", forced.explain());

    // An edited (dirty) working tree is another source tree: a miss, then remembered under its own key.
    std::fs::write(src.join("kernel.cu"), "v2").unwrap();
    let edited = gate("edited", &with_baseline);
    assert_eq!((edited.code, edited.verdict()), (0, "pass"), "{}", edited.explain());
    assert!(!edited.stdout.contains("reused"), "{}", edited.stdout);
    assert_eq!(entries(), 2);
    git_in(&src, &["commit", "-qam", "two"]);
    let committed = gate("committed", &with_baseline);
    assert!(committed.record.is_some(), "a clean tree hashes as git's tree, not as the dirty files did");
    assert_eq!(entries(), 3);

    // A warn (here: no baseline) must show every time.
    for out in ["warn-1", "warn-2"] {
        let warn = gate(out, &[]);
        assert_eq!((warn.code, warn.verdict()), (0, "warn"), "{}", warn.explain());
        assert!(!warn.stdout.contains("reused"), "{}", warn.stdout);
    }
    assert_eq!(entries(), 3, "a warn is never remembered");
}
