//! The baseline store: promotion, trust, and refusing a baseline of another identity.

use super::*;

/// A baseline of another identity is refused, naming the changed argument; promotion needs trust; a promoted
/// baseline is then picked from the store by identity and named.
#[test]
fn store_promotion_trust_and_identity_refusal() {
    let f = Fixture::new("store");
    let baseline = f.baseline();
    let changed = f.fault(&["-c", "2048"]);
    let run = changed.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("refusing to compare with baseline"), "{}", run.explain());
    assert!(run.stderr.contains("recipe.server_arguments: 6 → 8 items; from [6]: (end) → -c"), "{}", run.explain());

    let store = changed.path().join("team-store");
    let store_s = store.to_str().unwrap().to_owned();
    let first = changed.run_into("first", &[]);
    let promote = |extra: &[(&str, &str)], trusted: bool| {
        let mut args = vec!["baseline", "promote", first.out.to_str().unwrap(), "--store", &store_s, "--note", "first"];
        if trusted {
            args.push("--trusted");
        }
        gauntlet(&args, extra, Duration::from_secs(30))
    };
    let refused = promote(&[], false);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a trusted context"));
    let pr = promote(&[("GITHUB_ACTIONS", "true"), ("GITHUB_EVENT_NAME", "pull_request")], true);
    assert_eq!(pr.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&pr.stderr).contains("pull-request run"));
    let ok = promote(&[], true);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));

    let out = changed.path().join("second");
    let output = gauntlet(
        &["run", "--manifest", changed.path().join("gauntlet.toml").to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[("GAUNTLET_STORE", &store_s)],
        Duration::from_secs(60),
    );
    let second = finish(output, &out);
    assert_eq!(second.code, 0, "{}", second.explain());
    assert!(second.stderr.contains("baseline: #1 of profile `test`"), "{}", second.explain());
    assert!(second.stderr.contains("\"first\""), "{}", second.explain());
    assert_eq!(second.verdict(), "pass", "{}", second.explain());
    let verify = gauntlet(&["baseline", "verify", "--store", &store_s], &[], Duration::from_secs(30));
    assert_eq!(verify.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("1 entries, every chain and record intact"));

    // The same profile with an edited argument has no baseline, and says which baseline it no longer matches.
    let edited = changed.path().join("edited.toml");
    let text = std::fs::read_to_string(changed.path().join("gauntlet.toml")).unwrap();
    std::fs::write(&edited, text.replace("\"2048\"", "\"1024\"")).unwrap();
    let out = changed.path().join("edited-out");
    let output = gauntlet(
        &["run", "--manifest", edited.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[("GAUNTLET_STORE", &store_s)],
        Duration::from_secs(60),
    );
    let third = finish(output, &out);
    assert_eq!((third.code, third.verdict()), (0, "warn"), "{}", third.explain());
    assert!(third.has_finding("no-baseline"));
    assert!(third.stderr.contains("no baseline of this identity yet; the newest baseline of profile `test` (#1"));
    assert!(third.stderr.contains("recipe.server_arguments"), "{}", third.explain());
    assert!(third.stderr.contains("2048 → 1024"), "{}", third.explain());
    assert_no_survivors(&changed.tag);
}
