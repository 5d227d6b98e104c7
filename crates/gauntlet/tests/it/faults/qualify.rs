//! `gauntlet qualify` against the fake server: stage timeouts, a server dying between stages, the sha256 it
//! demands, promotion of a reviewed qualification, and the self-contained HTML report.

use super::*;

/// `gauntlet qualify` on the fixture: the model gets the sha256 qualification demands. Returns the exit code, the
/// report, the bundle folder and stdout.
fn qualify(f: &Fixture, stages: &str) -> (Option<i32>, serde_json::Value, PathBuf, String) {
    qualify_into(f, stages, "bundle", &[], &[])
}

/// Every stage in seconds on the fake server: few problems, short answers, a fast monitor.
const QUICK_QUALIFY: &str = "[profiles.test.qualify]\nquality = { count = 3, floor = 0.0 }\n\
    saturation = { max_tokens = 8 }\nperformance = { max_tokens = 8, warmups = 0, samples = 3 }\n\
    monitor = { interval = \"100ms\" }";
const ALL_STAGES: &str = "R1,R2,R3,R4,R5,R6";

fn qualify_into(
    f: &Fixture,
    stages: &str,
    folder: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, PathBuf, String) {
    let manifest = f.write_qualifiable();
    let out = f.path().join(folder);
    let mut args =
        vec!["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", stages, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = gauntlet(&args, env, Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let report = std::fs::read_to_string(out.join("qualification.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), serde_json::from_str(&report).unwrap(), out, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn stage<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["stages"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()
}

#[test]
fn qualify_stage_over_its_timeout_fails_and_the_bundle_still_verifies() {
    let f = Fixture::new("qualify-timeout")
        .fault(&["--token-delay-ms", "300"])
        .profile("request_timeout = \"20s\"\n[profiles.test.qualify]\ntimeouts = { R1 = \"1s\" }");
    let (code, report, bundle, stdout) = qualify(&f, "R1");
    assert_eq!(code, Some(1), "{stdout}");
    let r1 = stage(&report, "R1");
    assert_eq!((r1["status"].as_str(), r1["timed_out"].as_bool()), (Some("fail"), Some(true)), "{stdout}");
    assert!(r1["failures"][0].as_str().unwrap().starts_with("stage timeout of 1s reached"), "{r1}");
    assert_eq!(stage(&report, "R2")["status"], "not-run");
    assert_eq!(stage(&report, "R7")["status"], "pass", "{stdout}");
    assert_eq!((report["verdict"].as_str(), report["partial"].as_bool()), (Some("fail"), Some(true)));
    let md = std::fs::read_to_string(bundle.join("qualification.md")).unwrap();
    assert!(md.contains("| R1 |") && md.contains("FAIL (timed out)"), "{md}");
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
}

#[test]
fn qualify_server_death_between_stages_fails_the_next_stage() {
    // Warm-up + the 5 cases of R1 answered, then the server exits: R2 must find it down.
    let f = Fixture::new("qualify-death").fault(&["--fault", "crash-after", "--crash-after", "6"]);
    let (code, report, _, stdout) = qualify(&f, "R1,R2,R3,R6");
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(stage(&report, "R1")["status"], "pass", "{stdout}");
    // The exit races the health probe after R1: R2 finds the server down, or loses its requests to the dying
    // server and R3 finds it down. Either way the stage that follows the death fails and the rest do not run.
    assert_eq!(stage(&report, "R2")["status"], "fail", "{stdout}");
    let down = ["R2", "R3"]
        .into_iter()
        .find(|id| {
            stage(&report, id)["failures"][0]
                .as_str()
                .unwrap_or("")
                .starts_with("the server is down before this stage: exited")
        })
        .unwrap_or_else(|| panic!("no stage found the server down: {stdout}"));
    if down == "R2" {
        assert_eq!(stage(&report, "R3")["status"], "not-run", "{stdout}");
        assert_eq!(stage(&report, "R3")["summary"], "the server died in an earlier stage");
    }
    assert_eq!(stage(&report, "R6")["status"], "fail", "{stdout}");
    assert_eq!(stage(&report, "R7")["status"], "pass", "{stdout}");
}

#[test]
fn qualify_refuses_a_model_without_a_pinned_sha256_and_starts_nothing() {
    let f = Fixture::new("qualify-nosha");
    let manifest = f.write();
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("qualification.json")).unwrap()).unwrap();
    let r0 = stage(&report, "R0");
    assert_eq!(r0["status"], "fail");
    assert!(r0["failures"][0].as_str().unwrap().contains("has no sha256 in the manifest"), "{r0}");
    assert_eq!(stage(&report, "R1")["summary"], "R0 failed: the run stops");
    assert!(!out.join("server.log").exists(), "no server was started");
    assert_no_survivors(&f.tag);
    // The same folder is never overwritten.
    let again = gauntlet(&args, &[], Duration::from_secs(60));
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a qualification"));
}

#[test]
fn baseline_promote_records_a_reviewed_qualification_that_the_next_qualify_compares_with() {
    let f = Fixture::new("qualify-promote").profile(QUICK_QUALIFY);
    let store = f.path().join("store");
    let env = [("GAUNTLET_STORE", store.to_str().unwrap())];
    let (code, report, bundle, stdout) = qualify_into(&f, ALL_STAGES, "first", &env, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(
        stage(&report, "R5")["summary"],
        "no baseline: recorded as candidate evidence, no performance gate applied"
    );
    let b = bundle.to_str().unwrap();
    let promote = |dir: &str, note: &str| {
        let o = gauntlet(&["baseline", "promote", dir, "--trusted", "--note", note], &env, Duration::from_secs(30));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };

    // Refused: no reviewer's note; a bundle that no longer verifies; a partial one.
    let (code, _, err) = promote(b, "");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("say why with --note"), "{err}");
    let tampered = f.path().join("tampered");
    copy_dir(&bundle, &tampered);
    let r1 = tampered.join("r1-correctness.json");
    let text = std::fs::read_to_string(&r1).unwrap().replacen("\"pass\"", "\"fail\"", 1);
    std::fs::write(&r1, text).unwrap();
    let (code, _, err) = promote(tampered.to_str().unwrap(), "looks fine");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not promoted") && err.contains("r1-correctness.json"), "{err}");
    let (_, _, partial, _) = qualify_into(&f, "R1", "partial", &env, &[]);
    let (code, _, err) = promote(partial.to_str().unwrap(), "looks fine");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a partial qualification (R2, R3, R4, R5, R6 not run) is not promoted"), "{err}");

    // Accepted: the decision enters the identity's hash-chained history and the store still verifies.
    let (code, out, err) = promote(b, "reviewed the bundle; R2 floor is the demo's");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("qualified: #1 of profile `test`, qualification promoted"), "{out}");
    assert!(out.contains(&format!("bundle {}", report["run_id"].as_str().unwrap())), "{out}");
    let v = gauntlet(&["baseline", "verify"], &env, Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
    let format = std::fs::read_to_string(store.join("format.json")).unwrap();
    assert!(format.contains("\"format\": 2"), "{format}");
    let history = std::fs::read_dir(store.join("history")).unwrap().next().unwrap().unwrap().path();
    let entry: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&history).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(
        (entry["kind"].as_str(), entry["note"].as_str()),
        (Some("qualification"), Some("reviewed the bundle; R2 floor is the demo's"))
    );
    let decision: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(store.join("records").join(format!("{}.json", entry["record"].as_str().unwrap())))
            .unwrap(),
    )
    .unwrap();
    let manifest_sha = gauntlet_engine::util::sha256_file(&bundle.join("evidence-manifest.json")).unwrap();
    assert_eq!(decision["evidence_manifest_sha256"], manifest_sha.as_str());

    // The next qualification of the same identity compares R5 with the promoted one, unasked.
    let (code, again, _, stdout) = qualify_into(&f, "R5", "second", &env, &[]);
    assert!(matches!(code, Some(0) | Some(1) | Some(4)), "{stdout}");
    assert!(
        again["baseline"].as_str().unwrap().starts_with(&format!("store:{}", entry["record"].as_str().unwrap())),
        "{again}"
    );
    assert_ne!(stage(&again, "R5")["summary"], stage(&report, "R5")["summary"], "R5 had something to compare with");
    // A gate run of that identity still has no run baseline: a decision is not a gate baseline.
    let show = gauntlet(
        &["baseline", "show", "--manifest", f.path().join("gauntlet.toml").to_str().unwrap()],
        &env,
        Duration::from_secs(30),
    );
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("qualification promoted"),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );
}

#[test]
fn qualification_html_is_self_contained_and_renders_in_chromium_without_console_errors() {
    let f = Fixture::new("qualify-html").profile(QUICK_QUALIFY);
    let (code, _, first, stdout) = qualify_into(&f, ALL_STAGES, "first", &[], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let (_, report, bundle, stdout) =
        qualify_into(&f, ALL_STAGES, "second", &[], &["--baseline", first.to_str().unwrap()]);
    assert!(report["baseline"].is_string(), "{stdout}");
    let page = bundle.join("qualification.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Every plot the report promises: R4 and R5 latency CDFs, RSS and health latency over time, and one
    // baseline-against-candidate chart per compared metric.
    for title in [
        "R4 time to first token: cumulative distribution",
        "R5 end-to-end latency: cumulative distribution",
        "server RSS (process group) over time",
        "health latency over time",
        "ttft_mean: one dot per measured batch",
        "output_throughput_wall: one dot per measured batch",
    ] {
        assert!(html.contains(&format!("<title>{title}")), "no plot `{title}`");
    }
    assert!(html.contains("c2 baseline") && html.contains("c2 now"), "baseline and candidate side by side");
    // Readable offline: nothing is fetched, nothing runs.
    for outside in ["<script", "src=", "href=", "url(", "https://", "@import"] {
        assert!(!html.contains(outside), "the report refers outside itself: `{outside}`");
    }
    let png = f.path().join("report.png");
    let console = render_in_chromium(&page, &png);
    assert!(console.is_empty(), "console messages while rendering the report:\n{}", console.join("\n"));
    assert!(std::fs::metadata(&png).unwrap().len() > 20_000, "the screenshot is nearly empty");
    // The check itself works: a page that tries to load an outside image under the same policy is caught.
    let bad = f.path().join("bad.html");
    std::fs::write(&bad, html.replacen("<h1>", "<img src=\"https://example.invalid/x.png\"><h1>", 1)).unwrap();
    assert!(!render_in_chromium(&bad, &f.path().join("bad.png")).is_empty(), "a refused load went unnoticed");
    // The bundle still verifies with its HTML in it (the page is a view, not evidence).
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// The fixture's manifest (qualifiable) with its server program replaced by a script: `--version` runs `version`
/// (shell), anything else execs the fake server. Returns the manifest.
fn with_version_script(f: &Fixture, version: &str) -> PathBuf {
    let manifest = f.write_qualifiable();
    let bin = f.path().join("bin/fake-server");
    std::fs::remove_file(&bin).unwrap();
    let fake = workspace_bin("gauntlet-fake-server");
    std::fs::write(
        &bin,
        format!("#!/bin/sh\nif [ \"$1\" = --version ]; then\n{version}\nfi\nexec {} \"$@\"\n", fake.display()),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    manifest
}

/// Found re-running the #32 D15 reproduction: R0's `--version` probe of the server program waited for its output
/// pipes to close, so a program that exits but leaves a child holding them (`sleep 300 &`) hung `qualify` for as
/// long as that child lived. The probe is bounded: past the helper deadline its process group is killed, R0 says
/// why in `server_version`, and the run goes on.
#[test]
fn r0_version_probe_ends_when_the_program_leaves_a_child_holding_its_output() {
    let f = Fixture::new("qualify-version-child");
    let pid_file = f.path().join("child.pid");
    let manifest = with_version_script(
        &f,
        &format!("echo fake-server 1.0\nsleep 300 &\necho $! > {}\nexit 0", pid_file.display()),
    );
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let started = std::time::Instant::now();
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    let took = started.elapsed();
    let child: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let alive = std::path::Path::new(&format!("/proc/{child}")).exists()
        && !std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default().contains(") Z ");
    if alive {
        // SAFETY: kill has no memory-safety preconditions; the pid is the test's own `sleep`.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    assert_no_survivors(&f.tag);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!alive, "the probe's child outlived qualify: {stderr}");
    assert!(took < Duration::from_secs(60), "qualify took {took:?}: {stderr}");
    let r0: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("r0-identity.json")).unwrap()).unwrap();
    let why = r0["server_version"]["error"].as_str().unwrap_or_default();
    assert!(why.contains("kept its output open"), "{}", r0["server_version"]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("qualification.json")).unwrap()).unwrap();
    assert_eq!(stage(&report, "R1")["status"], "pass", "{stderr}");
    assert_eq!(o.status.code(), Some(0), "{stderr}");
}

/// Found re-running the #32 D15 reproduction: R0's `--version` probe ran the server program with gauntlet's whole
/// environment, not the one the server is started with (the allow-list plus the profile's `environment`): the
/// version it recorded could be another program's (another PATH or library path), and every ambient variable a
/// program chose to print reached r0-identity.json. The probe now gets the server's environment.
#[test]
fn r0_version_probe_runs_with_the_servers_environment_not_gauntlets() {
    let f = Fixture::new("qualify-version-env").profile("environment = { PROBE_VAR = \"from-profile\" }");
    let manifest = with_version_script(
        &f,
        "echo \"fake-server 1.0 profile=${PROBE_VAR:-unset} ambient=${GAUNTLET_TEST_AMBIENT:-unset}\"\nexit 0",
    );
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[("GAUNTLET_TEST_AMBIENT", "leaked")], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let r0: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("r0-identity.json")).unwrap()).unwrap();
    assert_eq!(r0["server_version"]["exit_code"], 0, "{}: {stderr}", r0["server_version"]);
    assert_eq!(
        r0["server_version"]["output"].as_str().unwrap_or_default().trim(),
        "fake-server 1.0 profile=from-profile ambient=unset",
        "{stderr}"
    );
    assert_eq!(o.status.code(), Some(0), "{stderr}");
}
