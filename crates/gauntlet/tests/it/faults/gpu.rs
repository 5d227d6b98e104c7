//! GPU, kernel log and doctor: the busy-GPU wait, kernel faults of our server, the kernel-log bracket, `gauntlet
//! doctor`, and a server that never touches its GPU.

use super::*;
use serde_json::json;

/// A fake GPU (`$GAUNTLET_FAKE_GPU`) with an identity and the given holders.
fn fake_gpu(root: &Path, holders: &[(u32, &str)]) -> PathBuf {
    let dir = root.join("fake-gpu");
    std::fs::create_dir_all(dir.join("holders")).unwrap();
    std::fs::write(
        dir.join("identity.json"),
        r#"{"vendor": "nvidia", "name": "NVIDIA H200", "driver": "580.159.04", "pci_bus_id": "00000000:00:06.0", "memory_total_bytes": 150754820096}"#,
    )
    .unwrap();
    for (pid, name) in holders {
        std::fs::write(dir.join("holders").join(pid.to_string()), name).unwrap();
    }
    dir
}

/// Another process on the GPU: the run waits (bounded), then skips with exit 3 naming it; freed during the
/// wait, the run goes ahead and records the wait; when nobody can tell, it fails closed.
#[test]
fn busy_gpu_skips_waits_or_fails_closed() {
    let mut f = Fixture::new("busy").profile("device = \"nvidia:0\"\nbusy_wait = \"1s\"");
    let gpu = fake_gpu(f.path(), &[(4242, "python3")]);
    let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())];
    let skipped = run_with_env(&f, "busy", &env);
    assert_eq!(skipped.code, 3, "{}", skipped.explain());
    assert!(skipped.stderr.contains("nvidia:0 is still in use after 1s: pid 4242 (python3)"), "{}", skipped.explain());
    assert!(skipped.record.is_none(), "nothing was started");
    let skip: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.path().join("busy/skipped.json")).unwrap()).unwrap();
    assert_eq!((skip["profile"].as_str(), skip["kind"].as_str()), (Some("test"), Some("gpu-busy")), "{skip}");
    let merged =
        gauntlet(&["report", "--merge", f.path().join("busy").to_str().unwrap()], &[], Duration::from_secs(30));
    let summary = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(3), "a merge of a skipped shard is skipped: {summary}");
    assert!(summary.contains("| test | skip | skipped (gpu-busy): nvidia:0 is still in use"), "{summary}");

    f.profile_extra = "device = \"nvidia:0\"\nbusy_wait = \"30s\"\n".into();
    let holder = gpu.join("holders/4242");
    let probes = gpu.join("probes.log");
    let _ = std::fs::remove_file(&probes);
    // Free the device once gauntlet has seen it busy (the fake probe logs each busy answer), never on a timer that
    // a slow start could outrun.
    let freer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&probes).is_ok_and(|t| t.contains("busy")) {
            assert!(std::time::Instant::now() < deadline, "gauntlet never looked at the busy GPU");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::remove_file(holder).unwrap();
    });
    let waited = run_with_env(&f, "waited", &env);
    freer.join().unwrap();
    assert_eq!(waited.code, 0, "{}", waited.explain());
    let sentry = &waited.record.as_ref().unwrap()["sentry"];
    assert!(sentry["gpu_wait_seconds"].as_f64().unwrap() >= 0.5, "{sentry}");
    assert_eq!(sentry["gpu_holders_seen"][0], "pid 4242 (python3)");
    let record = waited.record.as_ref().unwrap();
    assert_eq!(record["identity"]["binding"]["device"], "NVIDIA H200", "the GPU is part of the identity");
    assert_eq!(record["runtime"]["gpu"]["driver"], "580.159.04", "the driver is a runtime fact");

    std::fs::write(gpu.join("unknown"), "NVML: insufficient permissions").unwrap();
    let unknown = run_with_env(&f, "unknown", &env);
    assert_eq!(unknown.code, 1, "{}", unknown.explain());
    assert!(
        unknown.stderr.contains("failed closed: cannot tell whether nvidia:0 is free: NVML: insufficient permissions")
    );
}

/// Two GPUs of one host (#35): a profile bound to `nvidia:N` waits only for holders of device N, names that
/// device in its identity, and its server sees that device alone (through `CUDA_VISIBLE_DEVICES`, numbered by bus
/// id as NVML numbers it) — without the binding reaching the server, llama.cpp would spread over both GPUs and
/// each profile would find the other's server holding its device.
#[test]
fn each_profile_sees_only_its_own_gpu_of_two() {
    let mut f = Fixture::new("two-gpus").profile("device = \"nvidia:0\"\nbusy_wait = \"1s\"");
    let gpu = fake_gpu(f.path(), &[]);
    for (index, bus) in [(0, "00000000:00:06.0"), (1, "00000000:00:07.0")] {
        let dir = gpu.join(format!("devices/{index}"));
        std::fs::create_dir_all(dir.join("holders")).unwrap();
        let identity = json!({"vendor": "nvidia", "name": "NVIDIA H200", "driver": "580.159.04",
            "pci_bus_id": bus, "memory_total_bytes": 150754820096u64});
        std::fs::write(dir.join("identity.json"), identity.to_string()).unwrap();
    }
    std::fs::write(gpu.join("devices/1/holders/4343"), "python3").unwrap();
    let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())];

    let first = run_with_env(&f, "gpu0", &env);
    assert_eq!(first.code, 0, "a holder of nvidia:1 does not hold nvidia:0: {}", first.explain());
    let record = first.record.as_ref().unwrap();
    let seen = record["sentry"]["gpu_holders_seen"].as_array();
    assert!(seen.is_none_or(|s| s.is_empty()), "nobody held nvidia:0: {}", record["sentry"]);
    assert_eq!(record["runtime"]["gpu"]["pci_bus_id"], "00000000:00:06.0", "{}", record["runtime"]);
    let log = std::fs::read_to_string(first.out.join("server.log")).unwrap();
    assert!(log.contains("fake-server: CUDA_VISIBLE_DEVICES=0"), "{log}");
    assert!(log.contains("fake-server: CUDA_DEVICE_ORDER=PCI_BUS_ID"), "{log}");

    f.profile_extra = "device = \"nvidia:1\"\nbusy_wait = \"1s\"\n".into();
    let second = run_with_env(&f, "gpu1", &env);
    assert_eq!(second.code, 3, "{}", second.explain());
    assert!(second.stderr.contains("nvidia:1 is still in use after 1s: pid 4343 (python3)"), "{}", second.explain());

    std::fs::remove_file(gpu.join("devices/1/holders/4343")).unwrap();
    let freed = run_with_env(&f, "gpu1-free", &env);
    assert_eq!(freed.code, 0, "{}", freed.explain());
    assert_eq!(freed.record.as_ref().unwrap()["runtime"]["gpu"]["pci_bus_id"], "00000000:00:07.0");
    let log = std::fs::read_to_string(freed.out.join("server.log")).unwrap();
    assert!(log.contains("fake-server: CUDA_VISIBLE_DEVICES=1"), "{log}");

    // The profile's own setting is the user's word: it wins over the binding's.
    f.profile_extra =
        "device = \"nvidia:1\"\nbusy_wait = \"1s\"\nenvironment = { CUDA_VISIBLE_DEVICES = \"GPU-1234\" }\n".into();
    let own = run_with_env(&f, "gpu1-own", &env);
    assert_eq!(own.code, 0, "{}", own.explain());
    let log = std::fs::read_to_string(own.out.join("server.log")).unwrap();
    assert!(log.contains("fake-server: CUDA_VISIBLE_DEVICES=GPU-1234"), "{log}");
}

/// A GPU fault logged by the kernel during the run, naming our server's pid, fails the run; the same fault of
/// another process only warns. The kernel log is a file standing in for /dev/kmsg.
#[test]
fn kernel_fault_of_our_server_fails_the_run() {
    let f = Fixture::new("xid").profile("device = \"nvidia:0\"").fault(&["--token-delay-ms", "25"]);
    let gpu = fake_gpu(f.path(), &[]);
    for (ours, expect_code) in [(true, 1), (false, 0)] {
        let kmsg = f.path().join(format!("kmsg-{ours}"));
        std::fs::write(&kmsg, "6,100,1,-;NVRM: loading NVIDIA UNIX Open Kernel Module\n").unwrap();
        let tag = f.tag.clone();
        let kmsg_w = kmsg.clone();
        let writer = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let pid = loop {
                if let Some(pid) = crate::common::processes_tagged(&tag).first() {
                    break *pid;
                }
                assert!(std::time::Instant::now() < deadline, "server never started");
                std::thread::sleep(Duration::from_millis(20));
            };
            let pid = if ours { pid } else { 1 };
            let line =
                format!("3,101,2,-;NVRM: Xid (PCI:0000:00:06): 13, pid={pid}, name=whoever, Graphics Exception\n");
            let mut file = std::fs::OpenOptions::new().append(true).open(&kmsg_w).unwrap();
            std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
        });
        let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()), ("GAUNTLET_KMSG_FILE", kmsg.to_str().unwrap())];
        let run = run_with_env(&f, &format!("out-{ours}"), &env);
        writer.join().unwrap();
        assert_eq!(run.code, expect_code, "{}", run.explain());
        let sentry = &run.record.as_ref().unwrap()["sentry"];
        assert_eq!(sentry["kernel_log"], "fault", "{sentry}");
        assert_eq!(sentry["hits"][0]["ours"], ours, "{sentry}");
        assert_eq!(sentry["hits"][0]["device"], "0000:00:06.0");
        let fault = &run.findings("kernel-fault")[0];
        assert_eq!(fault["severity"], if ours { "fail" } else { "warn" }, "{fault}");
    }
}

/// Against this machine's real /dev/kmsg, a run is bracketed and clean.
#[test]
fn real_kernel_log_brackets_a_run() {
    let f = Fixture::new("kmsg");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let sentry = &run.record.as_ref().unwrap()["sentry"];
    assert_eq!(sentry["kernel_log"], "clean", "needs a readable /dev/kmsg (root or CAP_SYSLOG): {sentry}");
    assert!(sentry["boot_id"].as_str().is_some_and(|b| b.len() > 10), "{sentry}");
    assert!(run.record.as_ref().unwrap()["runtime"]["cpu"]["model"].as_str().is_some_and(|m| !m.is_empty()));
}

/// `gauntlet doctor --json` for the fixture's profile, as (exit code, subject → (status, detail, fix), stdout).
fn doctor(f: &Fixture, env: &[(&str, &str)], json: bool) -> (i32, BTreeMap<String, (String, String, String)>, String) {
    let manifest = f.write();
    let mut args = vec!["doctor", "--manifest", manifest.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let out = gauntlet(&args, env, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let mut checks = BTreeMap::new();
    if json {
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        for c in v["checks"].as_array().unwrap() {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            checks.insert(s("subject"), (s("status"), s("detail"), s("fix")));
        }
    }
    (code, checks, stdout)
}

/// Doctor on a GPU profile: every line says what a run would meet, and each one that is not ok has its fix.
#[test]
fn doctor_says_what_works_and_how_to_fix_what_does_not() {
    let mut f = Fixture::new("doctor").profile("device = \"nvidia:0\"\ngpu_lock = true");
    let gpu = fake_gpu(f.path(), &[(4242, "python3")]);
    let kmsg = f.path().join("kmsg");
    std::fs::write(
        &kmsg,
        "6,1,1,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n\
         3,2,2,-;NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
    )
    .unwrap();
    let locks = f.path().join("locks");
    let store = f.path().join("store");
    let env = [
        ("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()),
        ("GAUNTLET_KMSG_FILE", kmsg.to_str().unwrap()),
        ("GAUNTLET_LOCK_DIR", locks.to_str().unwrap()),
        ("GAUNTLET_STORE", store.to_str().unwrap()),
    ];
    let (code, checks, stdout) = doctor(&f, &env, true);
    assert_eq!(code, 0, "warnings only: {stdout}");
    let status = |subject: &str| checks.get(subject).map(|c| c.0.as_str()).unwrap_or("(missing)");
    let detail = |subject: &str| checks.get(subject).map(|c| c.1.clone()).unwrap_or_default();
    assert_eq!(status("kernel log"), "warn", "a device fault already in the log: {stdout}");
    assert!(detail("kernel log").contains("2 kernel record(s)") && detail("kernel log").contains("pre-run"));
    assert!(detail("kernel log").contains("fallen off the bus"), "{stdout}");
    assert_eq!(status("device"), "ok");
    assert!(detail("device").contains("NVIDIA H200") && detail("device").contains("driver 580.159.04"), "{stdout}");
    assert_eq!(status("gpu holders"), "warn");
    assert!(detail("gpu holders").contains("pid 4242 (python3)"), "{stdout}");
    assert!(checks["gpu holders"].2.contains("skips (exit 3)"), "the fix says what a run would do: {stdout}");
    for ok in ["host lock", "server binary", "model", "port", "store"] {
        assert_eq!(status(ok), "ok", "{ok}: {stdout}");
    }
    assert!(detail("model").contains("models/tiny.gguf"), "{stdout}");
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 0, "the store's probe file is gone");
    assert_eq!(
        checks.values().filter(|c| c.0 != "ok").filter(|c| c.2.is_empty()).count(),
        0,
        "every line that is not ok has a fix: {stdout}"
    );

    // Now break what a run needs: no model, a server that cannot execute, the port taken, holders unknowable,
    // no kernel log.
    f.model = false;
    f.executable = false;
    std::fs::write(gpu.join("unknown"), "NVML: insufficient permissions").unwrap();
    let _port = std::net::TcpListener::bind(("127.0.0.1", f.port)).unwrap();
    let missing = f.path().join("no-such-kmsg");
    let env = [
        ("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()),
        ("GAUNTLET_KMSG_FILE", missing.to_str().unwrap()),
        ("GAUNTLET_LOCK_DIR", locks.to_str().unwrap()),
    ];
    let (code, checks, stdout) = doctor(&f, &env, true);
    assert_eq!(code, 1, "a run would fail: {stdout}");
    let status = |subject: &str| checks.get(subject).map(|c| c.0.as_str()).unwrap_or("(missing)");
    assert_eq!(status("kernel log"), "warn", "blind is a warning: {stdout}");
    assert!(checks["kernel log"].2.contains("CAP_SYSLOG"), "{stdout}");
    assert_eq!(status("gpu holders"), "fail", "{stdout}");
    assert!(checks["gpu holders"].1.contains("NVML: insufficient permissions"), "{stdout}");
    assert_eq!(status("server binary"), "fail", "{stdout}");
    assert!(checks["server binary"].1.contains("is not executable"), "{stdout}");
    assert_eq!(status("model"), "fail", "{stdout}");
    assert_eq!(status("port"), "warn", "{stdout}");
    assert!(checks["port"].2.contains("--port"), "{stdout}");

    // The human form: one line per check, the fix under it, and the tally.
    let (code, _, text) = doctor(&f, &env, false);
    assert_eq!(code, 1);
    assert!(text.lines().any(|l| l.trim_start().starts_with("FAIL  model")), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("fix: ")), "{text}");
    assert!(text.trim_end().ends_with("3 fail: a run would fail"), "{text}");
}

/// A GPU profile whose server never holds the GPU computed on the CPU: the run says so. When the server's
/// process does hold it, the run records its pid and memory and says nothing.
#[test]
fn server_that_never_touches_its_gpu_is_flagged() {
    let f = Fixture::new("on-gpu").profile("device = \"nvidia:0\"").fault(&["--token-delay-ms", "20"]);
    let gpu = fake_gpu(f.path(), &[]);
    let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())];
    let cpu_only = run_with_env(&f, "cpu-only", &env);
    assert_eq!(cpu_only.code, 0, "{}", cpu_only.explain());
    let finding = &cpu_only.findings("server-not-on-gpu");
    assert_eq!(finding.len(), 1, "{}", cpu_only.explain());
    assert_eq!(finding[0]["severity"], "warn");
    assert!(finding[0]["message"].as_str().unwrap().contains("no process held nvidia:0 while the server ran"));

    // The server takes the GPU as it starts (the test stands in for the driver's process table).
    let tag = f.tag.clone();
    let holders = gpu.join("holders");
    let registrar = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(pid) = crate::common::processes_tagged(&tag).first() {
                std::fs::write(holders.join(pid.to_string()), "fake-server 536870912").unwrap();
                return *pid as u64;
            }
            assert!(std::time::Instant::now() < deadline, "server never started");
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let on_gpu = run_with_env(&f, "on-gpu", &env);
    let pid = registrar.join().unwrap();
    assert_eq!(on_gpu.code, 0, "{}", on_gpu.explain());
    assert!(!on_gpu.has_finding("server-not-on-gpu"), "{}", on_gpu.explain());
    let sentry = &on_gpu.record.as_ref().unwrap()["sentry"];
    assert_eq!(sentry["server_gpu_pids"], serde_json::json!([pid]), "{sentry}");
    assert_eq!(sentry["server_gpu_memory_bytes"], 536870912, "{sentry}");
}
