//! Attaching to a server gauntlet did not start, under a path prefix.

use super::*;

/// A server someone else started, reached through a path prefix: gauntlet attaches, never stops it, and says
/// that load time and crash detection were not available.
#[test]
fn attaches_to_a_running_server_under_a_path_prefix() {
    let f = Fixture::new("attach");
    let (mut server, manifest) = f.attached(&["--prefix", "/serving"], "/serving/", "FAKE_KEY");
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let missing_key = finish(gauntlet(&args, &[], Duration::from_secs(30)), &out);
    assert_eq!(missing_key.code, 2, "{}", missing_key.explain());
    assert!(missing_key.stderr.contains("api key variable `FAKE_KEY` is not set"), "{}", missing_key.explain());
    let run = finish(gauntlet(&args, &[("FAKE_KEY", "s3cret")], Duration::from_secs(30)), &out);
    let still_running = server.try_wait().unwrap().is_none();
    let _ = server.kill();
    let _ = server.wait();
    assert!(still_running, "gauntlet must not stop a server it attached to");
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass", "{}", run.explain());
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["mode"], "attached");
    assert_eq!(record["server"]["stop"], "attached");
    assert!(record["server"]["load_seconds"].is_null());
    assert!(run.findings("attached")[0]["message"].as_str().unwrap().contains("crash detection were not available"));
    let everything = std::fs::read_to_string(run.out.join("run.json")).unwrap()
        + &std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(!everything.contains("s3cret"), "the API key is never written");
    assert_no_survivors(&f.tag);
}
