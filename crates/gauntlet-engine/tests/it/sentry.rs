//! The sentry without a GPU: the pattern table against real-world lines, the kernel-log bracket on file-backed
//! sources (gaps, EPIPE, reboots, escapes, dictionary lines, facilities), busy detection through the fake
//! directory, and the CPU identity.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use gauntlet_engine::sentry::gpu::{self, Device, DirProbe, Wait};
use gauntlet_engine::sentry::kmsg::{Bracket, FileSource, parse_record};
use gauntlet_engine::sentry::patterns::{Patterns, normalise_bdf};
use gauntlet_engine::sentry::{Ours, assess};

fn fixture_lines() -> Vec<(String, String, String)> {
    include_str!("fixtures/fault-lines.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let (id, class, text) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            (id.to_owned(), class.to_owned(), text.replace("\\n", "\n"))
        })
        .collect()
}

#[test]
fn every_fixture_line_classifies_as_recorded() {
    let p = Patterns::embedded();
    let lines = fixture_lines();
    assert!(lines.len() >= 50, "the reference's fixture lines are all here");
    for (id, class, text) in lines {
        let (id, stderr) = match id.strip_suffix('*') {
            Some(i) => (i.to_owned(), true),
            None => (id, false),
        };
        let matches = p.classify(&text, stderr);
        if id == "negative" {
            let faults: Vec<_> = matches.iter().filter(|m| m.class.as_str() != "info").collect();
            assert!(faults.is_empty(), "negative line matched: {text:?} → {faults:?}");
            continue;
        }
        // `nv.xid45root` and `nv.154` are details the table folds into the Xid rule.
        let want = match id.as_str() {
            "nv.xid45root" | "nv.154" => "nv.xid",
            other => other,
        };
        assert!(matches.iter().any(|m| m.pattern == want), "{text:?} should match {want}: {matches:?}");
        if class != "-" {
            let worst = matches.iter().map(|m| m.class).max().unwrap();
            assert_eq!(worst.as_str(), class, "{text:?}: {matches:?}");
        }
    }
}

#[test]
fn xid_lines_carry_device_pid_and_process() {
    let p = Patterns::embedded();
    let m = &p.classify("NVRM: Xid (PCI:0000:01:00): 13, pid=1234, name=python3, Graphics SM Warp Exception", false)[0];
    assert_eq!((m.xid, m.pid, m.process.as_deref()), (Some(13), Some(1234), Some("python3")));
    assert_eq!(m.bdf.as_deref(), Some("0000:01:00.0"));
    let unknown = &p.classify(
        "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        false,
    )[0];
    assert_eq!((unknown.pid, unknown.process.as_deref()), (None, None));
    // An Xid code nobody catalogued is a device fault: fail closed.
    assert_eq!(p.classify("NVRM: Xid (PCI:0000:01:00): 999, something new", false)[0].class.as_str(), "device");
    assert_eq!(p.classify("NVRM: Xid (PCI:0000:01:00): 45, pid=1, name=x, channel 2", false)[0].class.as_str(), "app");
    assert_eq!(normalise_bdf("00000000:00:06.0"), "0000:00:06.0", "NVML's 8-digit domain");
    assert_eq!(normalise_bdf("0000:00:06"), "0000:00:06.0");
}

#[test]
fn records_parse_with_escapes_dictionary_and_unknown_fields() {
    let r = parse_record(b"6,339,5140900,-,caller=T1;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: has\\x5c fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:B3:00.0\n").unwrap();
    assert_eq!((r.facility, r.level, r.seq, r.micros), (0, 6, 339, 5140900));
    assert_eq!(r.text, "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: has\\ fallen off the bus.");
    assert_eq!(r.pci_device(), Some("0000:B3:00.0"));
    assert_eq!(parse_record(b"14,5,1,-;userspace").unwrap().facility, 1);
    for bad in [&b"garbage"[..], b"x,1,2,-;t", b"6,,2,-;t", b""] {
        assert!(parse_record(bad).is_none(), "{bad:?}");
    }
}

struct Kmsg {
    dir: tempfile::TempDir,
}

impl Kmsg {
    fn new(lines: &[&str]) -> Kmsg {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kmsg"), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
        std::fs::write(dir.path().join("boot_id"), "boot-a\n").unwrap();
        Kmsg { dir }
    }
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
    fn append(&self, lines: &[&str]) {
        let mut f = std::fs::OpenOptions::new().append(true).open(self.path("kmsg")).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }
    fn start(&self) -> Bracket {
        Bracket::start(Box::new(FileSource::open(&self.path("kmsg")).unwrap()), &self.path("boot_id"))
    }
}

fn ours(pid: u32) -> Ours {
    Ours { pids: vec![pid], names: vec!["llama-server".into()], bdf: Some("0000:01:00.0".into()), on_gpu: true }
}

fn kinds(findings: &[gauntlet_schema::Finding]) -> Vec<String> {
    findings.iter().map(|f| format!("{}:{}", f.kind, format!("{:?}", f.severity).to_lowercase())).collect()
}

#[test]
fn a_quiet_bracket_is_clean_and_pre_run_faults_are_machine_state() {
    let k = Kmsg::new(&[
        "6,1,10,-;NVRM: loading NVIDIA UNIX Open Kernel Module",
        "3,2,11,-;NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    ]);
    let b = k.start();
    k.append(&[
        "6,3,12,-;usb 1-1: new device",
        "14,4,13,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, written by a script",
    ]);
    let obs = b.finish(Duration::ZERO);
    assert_eq!((obs.first_seq, obs.last_seq, obs.lost, obs.ignored_userspace), (Some(3), Some(4), 0, 1));
    let (rec, findings) = assess(Ok(&obs), "", &ours(7));
    assert_eq!(rec.kernel_log, "clean", "{findings:?}");
    assert_eq!(rec.pre_run.len(), 1);
    assert!(rec.hits.is_empty(), "a userspace line that looks like an Xid is ignored");
    assert_eq!(kinds(&findings), ["kernel-pre-run:warn"]);
}

#[test]
fn a_sequence_gap_or_epipe_makes_the_bracket_incomplete() {
    let k = Kmsg::new(&["6,10,1,-;start"]);
    let b = k.start();
    k.append(&["6,11,2,-;a", "6,15,3,-;after a gap of three"]);
    let obs = b.finish(Duration::ZERO);
    assert_eq!(obs.lost, 3);
    let (rec, findings) = assess(Ok(&obs), "", &ours(7));
    assert_eq!(rec.kernel_log, "incomplete");
    assert_eq!(kinds(&findings), ["kernel-log-incomplete:warn"]);
    assert!(findings[0].message.contains("3 kernel-log records lost"), "{findings:?}");

    let k = Kmsg::new(&["6,10,1,-;start"]);
    let b = k.start();
    k.append(&["!EPIPE", "6,20,2,-;resumed"]);
    let obs = b.finish(Duration::ZERO);
    assert_eq!((obs.lost, obs.lost_unknown), (9, false), "EPIPE then the next record's sequence sizes the loss");
    let k = Kmsg::new(&["6,10,1,-;start"]);
    let b = k.start();
    k.append(&["!EPIPE", "6,11,2,-;contiguous yet EPIPE"]);
    let obs = b.finish(Duration::ZERO);
    assert!(obs.lost_unknown);
    assert_eq!(assess(Ok(&obs), "", &ours(7)).0.kernel_log, "incomplete");
}

#[test]
fn a_reboot_during_the_run_fails_it() {
    let k = Kmsg::new(&["6,1,1,-;start"]);
    let b = k.start();
    std::fs::write(k.path("boot_id"), "boot-b\n").unwrap();
    let obs = b.finish(Duration::ZERO);
    let (rec, findings) = assess(Ok(&obs), "", &ours(7));
    assert_eq!(rec.kernel_log, "incomplete");
    assert!(kinds(&findings).contains(&"host-rebooted:fail".to_owned()), "{findings:?}");
}

#[test]
fn faults_are_attributed_by_pid_device_and_process_line() {
    let k = Kmsg::new(&["6,1,1,-;start"]);
    let b = k.start();
    k.append(&[
        // ours by pid: an app fault of our server fails the run
        "3,2,2,-;NVRM: Xid (PCI:0000:01:00): 13, pid=4242, name=llama-server, Graphics Exception",
        // someone else's app fault on the same GPU: a warning
        "3,3,3,-;NVRM: Xid (PCI:0000:01:00): 31, pid=99, name=other, MMU Fault",
        // a device fault on another GPU: a warning
        "3,4,4,-;NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        // an amdgpu page fault named by the next record, and a device known only from the dictionary
        "3,5,5,-;amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)",
        " DEVICE=+pci:0000:01:00.0",
        "3,6,6,-;amdgpu 0000:01:00.0: amdgpu:  Process llama-server pid 4242 thread llama-server pid 4243",
        // the fallen-off-the-bus text spread over escaped newlines, on our device
        "0,7,7,-;NVRM: The NVIDIA GPU 0000:01:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
    ]);
    let obs = b.finish(Duration::from_millis(50));
    let (rec, findings) = assess(Ok(&obs), "", &ours(4242));
    assert_eq!(rec.kernel_log, "fault");
    let summary: Vec<(String, bool, String)> =
        rec.hits.iter().map(|h| (h.pattern.clone(), h.ours, h.class.clone())).collect();
    assert_eq!(
        summary,
        [
            ("nv.xid".into(), true, "app".into()),
            ("nv.xid".into(), false, "app".into()),
            ("nv.xid".into(), false, "device".into()),
            ("amd.pf".into(), true, "app".into()),
            ("nv.fallen".into(), true, "device".into()),
        ]
    );
    assert_eq!(rec.hits[3].device.as_deref(), Some("0000:01:00.0"));
    assert_eq!(
        kinds(&findings),
        ["kernel-fault:fail", "kernel-fault:warn", "kernel-fault:warn", "kernel-fault:fail", "kernel-fault:fail"]
    );
}

#[test]
fn runtime_fault_lines_in_the_server_stderr_fail_the_run() {
    let stderr = "load ok\nMemory access fault by GPU node-1 (Agent handle: 0x55cf74a379c0) on address 0x7f1b2c000000. Reason: Page not present or supervisor privilege.\n";
    let (rec, findings) = assess(Err("no kernel log here"), stderr, &ours(1));
    assert_eq!(rec.kernel_log, "blind");
    assert_eq!(kinds(&findings), ["kernel-log-blind:warn", "runtime-fault:fail"]);
    let cpu = Ours { on_gpu: false, ..Ours::default() };
    assert_eq!(kinds(&assess(Err("x"), "", &cpu).1), ["kernel-log-blind:info"], "blind is only noted on a CPU");
}

fn fake_gpu(holders: &[(u32, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("holders")).unwrap();
    for (pid, name) in holders {
        std::fs::write(dir.path().join("holders").join(pid.to_string()), name).unwrap();
    }
    dir
}

#[test]
fn busy_gpu_waits_then_frees_or_skips_and_unknown_fails_closed() {
    let dev = Device::parse("nvidia:0").unwrap();
    let dir = fake_gpu(&[(4242, "python3")]);
    let probe = DirProbe { dir: dir.path().to_owned() };
    match gpu::wait_until_free(&probe, &dev, Duration::from_millis(300), Duration::from_millis(20), &[]) {
        Wait::Busy { holders, .. } => assert_eq!(holders[0].to_string(), "pid 4242 (python3)"),
        other => panic!("{other:?}"),
    }
    let holder = dir.path().join("holders/4242");
    let freer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        std::fs::remove_file(holder).unwrap();
    });
    match gpu::wait_until_free(&probe, &dev, Duration::from_secs(20), Duration::from_millis(20), &[]) {
        Wait::Free { waited, seen } => {
            assert!(waited >= Duration::from_millis(100));
            assert_eq!(seen.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    freer.join().unwrap();
    std::fs::write(dir.path().join("unknown"), "NVML: insufficient permissions").unwrap();
    match gpu::wait_until_free(&probe, &dev, Duration::from_secs(1), Duration::from_millis(20), &[]) {
        Wait::Unknown(gpu::ProbeError::Told(why)) => assert_eq!(why, "NVML: insufficient permissions"),
        other => panic!("{other:?}"),
    }
    for bad in ["gpu", "nvidia", "nvidia:x", "tpu:0"] {
        assert!(Device::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn host_lock_excludes_a_second_holder() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::Nvidia(0);
    let first = gpu::lock_device(dir.path(), &dev, Duration::from_secs(1)).unwrap();
    let second = gpu::lock_device(dir.path(), &dev, Duration::from_millis(200));
    let e = second.err().unwrap();
    assert!(matches!(&e, gpu::LockError::Held { device, .. } if device == "nvidia:0"), "{e:?}");
    assert!(e.to_string().starts_with("another gauntlet holds nvidia:0 (lock "), "{e}");
    drop(first);
    gpu::lock_device(dir.path(), &dev, Duration::from_secs(1)).unwrap();
}

#[test]
fn cpu_identity_snapshot() {
    let fixture = gpu::cpu_identity(include_str!("fixtures/cpuinfo-x86.txt"));
    insta::assert_snapshot!(serde_json::to_string_pretty(&fixture).unwrap());
    // The live machine yields the same shape with a model name.
    let live = gpu::cpu_identity(&std::fs::read_to_string("/proc/cpuinfo").unwrap());
    assert!(!live["model"].as_str().unwrap().is_empty());
    assert!(live["logical_cpus"].as_u64().unwrap() >= 1);
}

/// The real `/dev/kmsg` of this machine (CI runs as root): a bracket around real work is `clean`, and a line
/// written from userspace in the middle that looks like an Xid is ignored (userspace cannot log as facility 0).
#[test]
fn real_dev_kmsg_bracket_is_clean_and_ignores_userspace() {
    let source = gauntlet_engine::sentry::kmsg::DevKmsg::open()
        .unwrap_or_else(|why| panic!("this test needs a readable /dev/kmsg (root or CAP_SYSLOG): {why}"));
    let b = Bracket::start(Box::new(source), Path::new("/proc/sys/kernel/random/boot_id"));
    let work = std::process::Command::new("sh").args(["-c", "echo work; ls / > /dev/null"]).output().unwrap();
    assert!(work.status.success());
    let marker = format!("gauntlet-test-{}", std::process::id());
    std::fs::write(
        "/dev/kmsg",
        format!(
            "<0>NVRM: Xid (PCI:0000:01:00): 79, pid={}, name={marker}, GPU has fallen off the bus.\n",
            std::process::id()
        ),
    )
    .expect("write to /dev/kmsg");
    let obs = b.finish(Duration::from_millis(200));
    assert!(obs.ignored_userspace >= 1, "our userspace line was read and ignored: {obs:?}");
    assert!(obs.during.iter().all(|r| !r.text.contains(&marker)));
    let (rec, findings) = assess(Ok(&obs), "", &Ours { pids: vec![std::process::id()], ..Ours::default() });
    assert_eq!(rec.kernel_log, "clean", "{findings:?} {obs:?}");
    assert_eq!(obs.boot_id_before, obs.boot_id_after);
}
