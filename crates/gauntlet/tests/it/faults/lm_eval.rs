//! R2 through lm-evaluation-harness when the harness is missing or hangs: infrastructure with the install command,
//! and a harness past the stage's deadline stopped with its whole process group.

use super::*;

const LM_EVAL_QUALITY: &str = "[profiles.test.qualify]\nquality = { floor = 0.5, lm_eval = { tasks = [\"arith\"], \
    limit = 2, include_path = \"tasks\" } }";

/// The qualifiable manifest, with the folder its lm-eval tasks live in.
fn with_tasks(f: &Fixture) -> PathBuf {
    std::fs::create_dir_all(f.path().join("tasks")).unwrap();
    f.write_qualifiable()
}

#[test]
fn qualify_with_lm_eval_absent_is_infrastructure_naming_the_install_command() {
    let f = Fixture::new("lm-eval-absent").profile(LM_EVAL_QUALITY);
    let manifest = with_tasks(&f);
    let home = f.path().join("empty-home");
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R2", "--out", out.to_str().unwrap()];
    // Neither gauntlet's own venv (an empty home) nor PATH has it.
    let env = [("GAUNTLET_HOME", home.to_str().unwrap()), ("PATH", "/nonexistent")];
    let o = gauntlet(&args, &env, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let install = format!(
        "python3 -m venv {v} && {v}/bin/pip install 'lm-eval[api]==0.4.13'",
        v = home.join("lm-eval").display()
    );
    assert!(stderr.contains("lm-evaluation-harness, which is not installed"), "{stderr}");
    assert!(stderr.contains(&install), "{stderr}");
    // Told before anything started: no server, no bundle.
    assert!(!out.join("qualification.json").exists());
    assert_no_survivors(&f.tag);

    // The same qualification without R2 does not need lm-eval.
    let out = f.path().join("no-r2");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &env, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(out.join("qualification.json").is_file());
    assert_no_survivors(&f.tag);
}

/// The pids a fake harness wrote, gone within a bounded wait (a killed process is reaped by its parent or init).
fn assert_gone(pids: &[i32]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<i32> = pids
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
            })
            .collect();
        if alive.is_empty() {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the harness's processes survived: {alive:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn lm_eval_past_the_stage_deadline_is_stopped_with_its_group_and_r2_fails() {
    let f = Fixture::new("lm-eval-hang")
        .profile(&format!("{LM_EVAL_QUALITY}\ntimeouts = {{ R2 = \"10s\" }}\nmonitor = {{ interval = \"100ms\" }}"));
    let manifest = with_tasks(&f);
    // A harness that never finishes, with a child of its own: both must be gone when the stage ends.
    let bin = f.path().join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("lm-eval");
    std::fs::write(
        &script,
        "#!/bin/sh\nhere=$(dirname \"$0\")\necho $$ >> \"$here/pids\"\nsleep 600 &\necho $! >> \"$here/pids\"\nwait\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R2", "--out", out.to_str().unwrap()];
    let started = std::time::Instant::now();
    let o = gauntlet(&args, &[("PATH", path.as_str())], Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    let pids: Vec<i32> = std::fs::read_to_string(bin.join("pids"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_gone(&pids);
    assert_no_survivors(&f.tag);

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("qualification.json")).unwrap()).unwrap();
    let r2 = report["stages"].as_array().unwrap().iter().find(|s| s["id"] == "R2").unwrap().clone();
    assert_eq!(r2["status"], "fail", "{r2}");
    let failures: Vec<&str> = r2["failures"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
    assert!(failures.contains(&"lm-eval did not finish successfully (see r2-lm-eval.log)"), "{failures:?}");
    assert!(failures.contains(&"lm-eval wrote no results"), "{failures:?}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("r2-quality.json")).unwrap()).unwrap();
    assert!(file["lm_eval"]["exit"].as_str().unwrap().starts_with("stopped at the stage deadline"), "{file}");
    // Its command: the chat-completions model on the session's server, offline flags never on the command line.
    let command: Vec<&str> = file["lm_eval"]["command"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(command[..4], ["run", "--model", "local-chat-completions", "--model_args"]);
    assert!(
        command[4].starts_with(&format!("base_url=http://127.0.0.1:{}/v1/chat/completions,", f.port)),
        "{command:?}"
    );
    assert!(command.contains(&"--apply_chat_template") && command.contains(&"--log_samples"), "{command:?}");
    // The scratch folder is gone, and the bundle verifies: a failed R2 recomputes as failed.
    assert!(!out.join(".r2-lm-eval").exists());
    let v = gauntlet(&["verify", "--json", out.to_str().unwrap()], &[], Duration::from_secs(30));
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["problems"], serde_json::json!([]), "{v}");
}
