//! Every wait has a deadline and the bench holds bounded text: an open loop at the lowest rate gauntlet paces ends
//! within the request timeout, a git that hangs is killed at the helper deadline, and a server streaming a long
//! answer leaves only a few KiB of its text in the bench record, every event's time kept.

use super::*;

fn bench_once(f: &Fixture, out: &str, extra: &[&str], limit: Duration) -> (Option<i32>, String, serde_json::Value) {
    let manifest = f.write();
    let out = f.path().join(out);
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--warmups", "0", "--samples", "1"];
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = gauntlet(&args, &[], limit);
    assert_no_survivors(&f.tag);
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let record = std::fs::read_to_string(out.join("bench.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|e| panic!("no bench.json ({e}): {text}"));
    (o.status.code(), text, record)
}

/// At one request per million seconds the second arrival of a batch lies days away: it is failed with the reason
/// when the request timeout (3 s here) has passed, and the bench ends instead of waiting for it.
#[test]
fn open_loop_at_the_lowest_rate_ends_within_the_request_timeout() {
    let f = Fixture::new("rate-floor");
    let started = std::time::Instant::now();
    let (code, text, record) =
        bench_once(&f, "bench", &["--concurrency", "2", "--rate", "0.000001"], Duration::from_secs(60));
    assert_eq!(code, Some(1), "{text}");
    assert!(started.elapsed() < Duration::from_secs(45), "took {:?}", started.elapsed());
    let requests = record["levels"][0]["batches"][0]["requests"].as_array().unwrap();
    assert!(requests[0].get("error").is_none(), "the first arrives at once: {}", requests[0]);
    let error = requests[1]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("not sent: its arrival") && error.contains("request timeout (3s)"), "{error}");
    assert_eq!(record["levels"][0]["metrics"]["failed"], 1, "{text}");
}

/// A server's long streamed answer: the record keeps every event (and so every time and token count) but at
/// most a few KiB of text, and says how much it dropped.
#[test]
fn bench_keeps_bounded_text_per_request_and_says_how_much_it_dropped() {
    let words: String = (0..3000).map(|i| format!("word{i:05} ")).collect();
    let f = Fixture::new("bench-text-cap").answers(vec![("", words.clone())]);
    let (code, text, record) =
        bench_once(&f, "bench", &["--concurrency", "1", "--max-tokens", "4000"], Duration::from_secs(120));
    assert_eq!(code, Some(0), "{text}");
    let request = &record["levels"][0]["batches"][0]["requests"][0];
    let events = request["events"].as_array().unwrap();
    let kept: usize = events.iter().map(|e| e[1].as_str().unwrap().len() + e[2].as_str().unwrap().len()).sum();
    let tokens = events.iter().filter(|e| !e[1].as_str().unwrap().is_empty()).count();
    assert_eq!(tokens, 3000, "every token event is kept");
    // 4 KiB verbatim, then one character per event.
    assert!(kept <= 4096 + 3000, "{kept} bytes of text kept");
    assert_eq!(request["text_dropped"].as_u64(), Some((words.len() - kept) as u64), "{request}");
    assert!(words.starts_with(&events.iter().map(|e| e[1].as_str().unwrap()).take(400).collect::<String>()));
    assert_eq!(record["levels"][0]["metrics"]["output_tokens"], 3000, "{text}");
}

/// `plan --since` runs git; a git that never ends (a lock, a hung filesystem) is killed with what it started at
/// the helper deadline (20 s), and plan says so.
#[test]
fn plan_kills_a_git_that_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("gauntlet-test-git-hang-{}", std::process::id());
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // Not exec: the shell waits for its child, which holds git's output pipes too.
    let script = format!(
        "#!/bin/sh\n{} --sleeper --tag {tag} --lifetime-s 120\n",
        workspace_bin("gauntlet-fake-server").display()
    );
    let git = bin.join("git");
    std::fs::write(&git, script).unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let manifest = dir.path().join("m.toml");
    std::fs::write(
        &manifest,
        "version = 1\n[plan.profiles]\np = [\"x/\"]\n[profiles.p]\nbase_url = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let args = ["plan", "--manifest", manifest.to_str().unwrap(), "--since", "HEAD~1", "--repo", "."];
    let started = std::time::Instant::now();
    let out = gauntlet(&args, &[("PATH", &path)], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("did not finish within 20s"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(40), "took {:?}", started.elapsed());
    assert_no_survivors(&tag);
}

/// Peak resident memory (KiB) of one `gauntlet bench` of `batches` batches of 50 instant answers, from the kernel's
/// accounting of the reaped process (`wait4`'s `ru_maxrss`: the largest of gauntlet and the server it reaped), and
/// its record.
fn bench_peak_kib(f: &Fixture, out: &str, batches: usize) -> (u64, serde_json::Value) {
    use std::os::unix::process::ExitStatusExt;
    let manifest = f.write();
    let out = f.path().join(out);
    let reps = batches.to_string();
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--concurrency", "50", "--warmups", "0"];
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    cmd.args(args).args(["--samples", &reps, "--out", out.to_str().unwrap()]);
    // Output to files: a pipe nobody reads while waiting could fill and stall the bench.
    let log = f.path().join(format!("{}.log", out.file_name().unwrap().to_str().unwrap()));
    let file = std::fs::File::create(&log).unwrap();
    cmd.stdin(std::process::Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file);
    let scratch = tempfile::tempdir().unwrap();
    crate::common::isolate(&mut cmd, &[], &scratch);
    // Reaped by `wait4` below (which gives its peak memory), not by `Child::wait`.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("spawn gauntlet");
    let pid = child.id() as libc::pid_t;
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let (status, usage) = loop {
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child; the pointers are to live locals.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break (std::process::ExitStatus::from_raw(status), usage);
        }
        assert_eq!(reaped, 0, "wait4: {}", std::io::Error::last_os_error());
        if std::time::Instant::now() >= deadline {
            // SAFETY: a signal to our own, not yet reaped, child; then reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the bench did not end within 600 s: {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_no_survivors(&f.tag);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{text}");
    let record = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    (usage.ru_maxrss as u64, record)
}

/// A long bench's memory does not grow with its requests: they go to the spill file as each batch ends, and the
/// bench keeps numbers in bounded distributions (bench/summary.rs; their bound is the unit tests'). Four times the
/// requests (1000, then 4000 of 40 tokens each) may raise the peak by far less than the records held in memory took
/// (about 3.5 KiB per request at 40 tokens, and again as much for bench.json's text; 15 KiB per request measured
/// before the spill): at most 2 KiB per added request. Measured: 313 and 1076 B per added request while every value
/// was kept (8 bytes each, in vectors that grow by doubling, and again in bench.html's curves); −72 to 142 B with the
/// bounded distributions (2026-12-03), the peak's noise. bench.json still carries every request (streamed from the
/// spill when written).
#[test]
fn bench_memory_does_not_grow_with_its_requests() {
    let f = Fixture::new("bench-memory")
        .answers(vec![("__token_delay_ms", "0".into()), ("", answer("word"))])
        .profile("request_timeout = \"60s\"");
    let (small, record) = bench_peak_kib(&f, "small", 20);
    assert_eq!(record["levels"][0]["metrics"]["requests"], 1000);
    let (large, record) = bench_peak_kib(&f, "large", 80);
    let per_request = (large as f64 - small as f64) * 1024.0 / 3000.0;
    eprintln!("peak RSS: {small} KiB at 1000 requests, {large} KiB at 4000: {per_request:.0} bytes per added request");
    assert!(
        per_request < 2048.0,
        "peak RSS {small} KiB at 1000 requests, {large} KiB at 4000: {per_request:.0} B per request"
    );
    let m = &record["levels"][0]["metrics"];
    assert_eq!((m["requests"].as_u64(), m["failed"].as_u64()), (Some(4000), Some(0)), "{m}");
    let spill = &record["spill"];
    assert_eq!((spill["records"].as_u64(), spill["dropped"].as_u64()), (Some(4000), Some(0)), "{spill}");
    let kept: usize = record["levels"][0]["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["requests"].as_array().unwrap().len())
        .sum();
    assert_eq!(kept, 4000, "bench.json carries every request");
}

/// The shipped binary allocates with jemalloc as src/allocator.rs sets it up (one arena, freed pages handed back after a
/// second): under glibc's malloc a bench's resident memory grew through a whole hour against the real server with
/// its heap flat (docs/validation/2026-12-04-memory-and-soak.md). jemalloc prints the settings it runs with at exit
/// when its environment variable asks it to (only the general part: 2 KiB).
#[test]
fn the_binary_allocates_with_jemalloc_set_up_for_a_long_bench() {
    let o = gauntlet(
        &["--version"],
        &[("_RJEM_MALLOC_CONF", "stats_print:true,stats_print_opts:mdablxe")],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("___ Begin jemalloc statistics ___"), "not jemalloc:\n{stderr}");
    let setting = |name: &str| {
        stderr.lines().find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(": ")).and_then(|v| v.split(' ').next())
    };
    assert_eq!(setting("opt.narenas"), Some("1"), "{stderr}");
    assert_eq!(setting("opt.dirty_decay_ms"), Some("1000"), "{stderr}");
}
