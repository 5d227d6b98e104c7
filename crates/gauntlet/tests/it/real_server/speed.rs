//! The gate's speed check on the real embedded default's server and model (its launcher, SmolLM2-135M) with one
//! decode thread (`-t 1`) and a short suite of eight answers of up to 48 tokens (the default suite's long-prompt case alone
//! takes minutes on a busy 2-core runner), on whatever machine runs it (a shared runner, a build beside it): an
//! unchanged re-run does not warn on speed, and the same server slowed by a known amount does. The slowdown is a
//! cgroup-v1 CPU quota of 70 ms per 100 ms period on the server's own CPU group (`/sys/fs/cgroup/cpu`, the
//! controller `scripts/soak.sh --quota` uses): a server that needs one CPU gets 70 % of one, about a 30 % slower
//! decode on its own CPU clock. The server joins its group itself (a wrapper in front of the launcher reads the group
//! from a file beside it), so gauntlet and its client stay outside. The baseline and the unchanged re-run share the
//! machine like any task (that is the contention the check must see through); the quota's group also weighs more,
//! so that the quota binds however busy the machine (see the test). Nothing here is timed: the test asserts
//! findings; what the speed check measured (contention, ratios) is printed with the load average.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{assert_server_gone, home};
use crate::common::{Run, finish, free_port, gauntlet};

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Eight prompts that each decode up to 48 tokens; a check every answer passes (speed is what is judged). Cases of
/// 16 tokens (about 0.35 s under the quota, 3–4 of its periods) let the quota bite less: each case starts with a
/// full period's budget after the idle gap before it, so the corrected ratio under the quota was 0.62–0.78 (upper
/// bounds up to 0.83) rather than 0.70 in eight runs on 2026-12-06.
fn suite() -> String {
    let mut s = String::from("id = \"speed\"\nversion = 1\n");
    for (i, topic) in
        ["the sea", "a cat", "the moon", "bread", "a river", "winter", "a library", "the wind"].iter().enumerate()
    {
        s.push_str(&format!(
            "[[cases]]\nid = \"s{i}\"\nmax_tokens = 48\nmessages = [{{ role = \"user\", content = \"Write five \
             sentences about {topic}.\" }}]\ncheck = {{ min_words = 3 }}\n"
        ));
    }
    s
}

/// The server binary of the manifest: joins the CPU group named in `cpu-group` beside it, then runs the launcher.
/// Shell builtins only (the server's environment has no PATH to rely on).
const WRAPPER: &str = "#!/bin/sh\n\
read -r group < \"${0%/*}/cpu-group\" || exit 97\n\
echo $$ > \"$group/cgroup.procs\" || exit 98\n\
exec \"${0%/*}/launcher\" \"$@\"\n";

/// A manifest in `dir`: the embedded default's model and launcher (linked from gauntlet's home, the launcher behind
/// [`WRAPPER`]), one decode thread, the short suite.
fn manifest(dir: &Path, port: u16) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = home();
    for (link, target) in [("model.gguf", home.join(MODEL)), ("launcher", home.join("bin/xllamacpp-server"))] {
        assert!(target.exists(), "{} is missing: run scripts/setup.sh", target.display());
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
    }
    let wrapper = dir.join("xllamacpp-server");
    std::fs::write(&wrapper, WRAPPER).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("suite.toml"), suite()).unwrap();
    let text = format!(
        "version = 1\n[models.smol]\npath = \"model.gguf\"\n[servers.xllamacpp]\nbinary = \"xllamacpp-server\"\n\
         [profiles.speed]\nmodel = \"smol\"\nserver = \"xllamacpp\"\nport = {port}\nsuite = \"suite.toml\"\n\
         server_arguments = [\"-c\", \"4096\", \"-np\", \"1\", \"-t\", \"1\"]\nload_timeout = \"120s\"\n\
         request_timeout = \"120s\"\nsuite_budget = \"600s\"\nstop_grace = \"10s\"\n"
    );
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// [`manifest`] with one setting's line replaced (`(from, to)`; `from` must be there).
fn manifest_with(dir: &Path, port: u16, (from, to): (&str, &str)) -> PathBuf {
    assert!(home().join("bin/xllamacpp-server").is_file(), "run scripts/setup.sh first");
    let path = manifest(dir, port);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from} is not in the manifest");
    std::fs::write(&path, text.replace(from, to)).unwrap();
    path
}

fn run_profile(manifest: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let home = home();
    let store = manifest.parent().unwrap().join("store");
    let env = [("GAUNTLET_STORE", store.to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
    finish(gauntlet(&args, &env, std::time::Duration::from_secs(700)), out)
}

/// A group in the cgroup-v1 `cpu` hierarchy with a weight (`cpu.shares`; a nice-0 task weighs 1024), optionally with
/// a quota per 100 ms period; removed on drop (once its tasks have exited).
struct Group {
    dir: PathBuf,
}

impl Group {
    fn new(name: &str, quota_us: Option<u64>, shares: u64) -> Group {
        let dir = Path::new("/sys/fs/cgroup/cpu").join(format!("gauntlet-speed-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("this test needs a writable cgroup-v1 cpu hierarchy ({}): {e}", dir.display()));
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(dir.join("cpu.cfs_quota_us"), quota_us.map_or("-1".into(), |q| q.to_string())).unwrap();
        std::fs::write(dir.join("cpu.shares"), shares.to_string()).unwrap();
        Group { dir }
    }

    /// The server of the next run starts in this group.
    fn select(&self, manifest: &Path) {
        std::fs::write(manifest.parent().unwrap().join("cpu-group"), format!("{}\n", self.dir.display())).unwrap();
    }

    fn cpu_stat(&self) -> String {
        std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default().replace('\n', " ")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
}

/// What the speed check measured in a run, for the log: its contention, threads, throttled time, the load, the
/// judgement (with the median ratio) and each case's factor.
fn measured(run: &Run) -> String {
    let r = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    let c = &r["decode"]["speed_check"];
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let rate = |id: &Value| {
        let case = r["cases"].as_array().and_then(|cs| cs.iter().find(|c| c["id"] == *id));
        case.map_or(f64::NAN, |c| f(&c["answer"]["timings"]["predicted_per_second"]))
    };
    // Per case: the server's rate, cpu/wait/throttled/wall milliseconds, the factor.
    let factors: Vec<String> = c["cases"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|c| {
                    format!(
                        "{:.0}tok/s {:.0}/{:.0}/{:.0}/{:.0}ms ×{:.2}",
                        rate(&c["case"]),
                        f(&c["cpu_seconds"]) * 1e3,
                        f(&c["wait_seconds"]) * 1e3,
                        f(&c["throttled_seconds"]) * 1e3,
                        f(&c["wall_seconds"]) * 1e3,
                        f(&c["factor"])
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let machine = &c["machine"];
    format!(
        "verdict {}, wall {:.0}s, load {:.2}s (cpu {}, wait {}, throttled {}), contention {}, neighbours {}, busy \
         threads {}, throttled {}s, machine {:.2} GB/s {:.1} Msteps/s ({} readings), cases [{}], judgement {}",
        r["verdict"],
        r["wall_seconds"].as_f64().unwrap_or(f64::NAN),
        r["server"]["load_seconds"].as_f64().unwrap_or(f64::NAN),
        r["server"]["load_cpu"]["cpu_seconds"],
        r["server"]["load_cpu"]["wait_seconds"],
        r["server"]["load_cpu"]["throttled_seconds"],
        c["contention"],
        c["neighbours"],
        c["busy_threads"],
        c["throttled_seconds"],
        f(&machine["memory_bytes_per_second"]) / 1e9,
        f(&machine["steps_per_second"]) / 1e6,
        machine["readings"],
        factors.join(", "),
        c["judgement"]
    )
}

fn speed_findings(run: &Run) -> Vec<Value> {
    let record = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            ["slow-decode", "slow-load", "speed-unsettled", "speed-not-judged"]
                .contains(&f["kind"].as_str().unwrap_or(""))
        })
        .cloned()
        .collect()
}

fn warned(findings: &[Value], kind: &str) -> bool {
    findings.iter().any(|f| f["kind"] == kind && f["severity"] == "warn")
}

/// What one attempt of the quota test saw: the quota judged (and warned, or the test failed), or the machine's own
/// speed moved between the baseline and the quota's run, so that the gate rightly did not judge decode.
enum Attempt {
    Judged,
    MachineMoved(String),
}

/// The gate's speed check on the real server, one thread: an unchanged re-run does not warn, and a 30 % CPU quota on
/// the server's group does. The machine's own speed moves between runs with nothing in the VM to show it (a host's
/// other guests: the CI run of 2026-12-07 had its baseline take 37 % more CPU time per token than the run ten
/// seconds later, and the quota passed against it). The gate measures the machine at every case and puts decode on
/// its clock; past the range that correction was measured over it does not judge decode, saying so. The quota must
/// be judged to be shown, so the test then takes a new baseline, at most three times, and fails naming the shifts.
#[test]
fn an_unchanged_rerun_does_not_warn_on_speed_and_a_cpu_quota_does() {
    assert!(home().join("bin/xllamacpp-server").is_file(), "run scripts/setup.sh first");
    let dir = tempfile::tempdir().unwrap();
    let mut moved = Vec::new();
    for attempt in 1..=3 {
        match quota_attempt(&dir.path().join(format!("attempt-{attempt}"))) {
            Attempt::Judged => return,
            Attempt::MachineMoved(why) => {
                eprintln!("attempt {attempt}: the machine moved, not judged: {why}");
                moved.push(why);
            }
        }
    }
    panic!("in each of 3 attempts the machine's own speed moved between the baseline and the quota's run: {moved:#?}");
}

fn quota_attempt(dir: &Path) -> Attempt {
    std::fs::create_dir_all(dir).unwrap();
    let baseline = dir.join("baseline.json");
    let port = free_port();
    let manifest = manifest(dir, port);

    let first_group = Group::new("baseline", None, 1024);
    first_group.select(&manifest);
    let load = loadavg();
    let first = run_profile(&manifest, &dir.join("first"), &["--write-baseline", baseline.to_str().unwrap()]);
    assert_server_gone(port);
    assert!(baseline.is_file(), "{}", first.explain());
    eprintln!("baseline (load average {load} → {}): {}", loadavg(), measured(&first));
    let check = &first.record.as_ref().unwrap()["decode"]["speed_check"];
    assert_eq!(check["cases"].as_array().map(Vec::len), Some(8), "every case has its CPU account: {check}");
    assert_eq!(check["busy_threads"], 1, "`-t 1`: one thread decodes: {check}");
    assert!(check["machine"]["readings"].as_u64() >= Some(8), "the machine was measured at every case: {check}");
    drop(first_group);

    // Every run in a group of its own, so that the unchanged re-run and the slowed one differ from the baseline by
    // the quota alone.
    let same = Group::new("unchanged", None, 1024);
    same.select(&manifest);
    let load = loadavg();
    let second = run_profile(&manifest, &dir.join("second"), &["--baseline", baseline.to_str().unwrap()]);
    assert_server_gone(port);
    drop(same);
    let unchanged = speed_findings(&second);
    eprintln!("unchanged re-run (load average {load} → {}): {}\n  {unchanged:?}", loadavg(), measured(&second));
    assert!(!warned(&unchanged, "slow-decode") && !warned(&unchanged, "slow-load"), "{}", second.explain());

    // 70 ms of CPU per 100 ms on the server's own group: about a 30 % slower decode for a server with one thread.
    // A quota only slows a server that would get more than it caps: at load 8 on this 2-core VM the server got
    // about half a CPU (2026-12-06: contention 46-52 %, and a 70 % quota throttled 0 of 57 periods), so this
    // group also weighs 16 tasks. Its wall clocks then run about as fast as the baseline's or faster; only the
    // server's own CPU clock shows the quota.
    let slowed = Group::new("quota", Some(70_000), 16 * 1024);
    slowed.select(&manifest);
    let load = loadavg();
    let third = run_profile(&manifest, &dir.join("third"), &["--baseline", baseline.to_str().unwrap()]);
    assert_server_gone(port);
    let stat = slowed.cpu_stat();
    drop(slowed);
    let quota = speed_findings(&third);
    eprintln!(
        "under a quota of 70 ms per 100 ms (load average {load} → {}; cpu.stat {stat}): {}\n  {quota:?}",
        loadavg(),
        measured(&third)
    );
    // Other processes working beside the baseline or the quota's run change what each CPU second of the server
    // decodes, and the gate then rightly does not judge decode (issue #30): this test cannot show the quota then.
    let crowded = |run: &Run| run.record.as_ref().unwrap()["decode"]["speed_check"]["neighbours"].as_f64();
    assert!(
        !quota
            .iter()
            .any(|f| f["kind"] == "speed-not-judged"
                && f["message"].as_str().unwrap_or("").contains("other processes used")),
        "the machine was busy beside this test (other processes used {:?} of the CPU time the server left in the \
         baseline, {:?} under the quota): the quota cannot be judged; run the speed group alone, as scripts/test.sh \
         does\n{quota:?}",
        crowded(&first),
        crowded(&third)
    );
    if let Some(f) = quota.iter().find(|f| {
        f["kind"] == "speed-not-judged" && f["message"].as_str().unwrap_or("").contains("the machine itself was slower")
    }) {
        return Attempt::MachineMoved(f["message"].as_str().unwrap_or("").to_owned());
    }
    assert!(warned(&quota, "slow-decode"), "a 30 % slower server must warn: {quota:?}\n{}", third.explain());
    Attempt::Judged
}

/// A busy-loop shell in `group`, killed and reaped on drop.
fn hog(group: &Group) -> crate::common::Reaped {
    let script = format!("echo $$ > {}/cgroup.procs || exit 98; while :; do :; done", group.dir.display());
    crate::common::Reaped(std::process::Command::new("sh").args(["-c", &script]).spawn().unwrap())
}

/// The suite budget is the server's time, not the machine's. The same short suite with a 15 s budget (about 7 s
/// of work for this server alone): crowded by two busy loops whose group weighs four times the server's, so that the
/// server gets about a third of a CPU and the suite takes about three times as long, the run gives the budget back
/// what the server's threads waited for those CPUs and ends with every case run (no `over-budget`), saying so in a
/// `budget-credit` event; slowed as much by its own CPU quota (25 ms per 100 ms), it is over budget, since time
/// its quota throttled is the server's own slowness. Nothing is timed here beyond the budget under test.
#[test]
fn a_crowded_machine_gives_the_suite_budget_back_and_a_server_slowed_by_its_own_quota_does_not_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manifest = manifest_with(dir.path(), port, ("suite_budget = \"600s\"", "suite_budget = \"15s\""));
    let events = |run: &Run| -> Vec<Value> {
        let r = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
        r["server"]["events"].as_array().cloned().unwrap_or_default()
    };

    let server_group = Group::new("crowded", None, 1024);
    let hogs_group = Group::new("hogs", None, 4096);
    server_group.select(&manifest);
    let hogs = [hog(&hogs_group), hog(&hogs_group)];
    let load = loadavg();
    let crowded = run_profile(&manifest, &dir.path().join("crowded"), &[]);
    drop(hogs);
    assert_server_gone(port);
    drop((server_group, hogs_group));
    let credit: Vec<Value> = events(&crowded).into_iter().filter(|e| e["kind"] == "budget-credit").collect();
    eprintln!("crowded (load average {load} → {}): {}\n  {credit:?}", loadavg(), measured(&crowded));
    assert!(!crowded.has_finding("over-budget"), "{}", crowded.explain());
    let cases = crowded.record.as_ref().unwrap()["cases"].as_array().unwrap().clone();
    assert!(cases.iter().all(|c| c["skip_reason"].is_null()), "every case ran: {cases:?}");
    assert_eq!(credit.len(), 1, "{}", crowded.explain());
    let detail = credit[0]["detail"].as_str().unwrap();
    assert!(detail.starts_with("the suite budget was extended by "), "{detail}");

    let slowed = Group::new("slowed", Some(25_000), 16 * 1024);
    slowed.select(&manifest);
    let load = loadavg();
    let quota = run_profile(&manifest, &dir.path().join("quota"), &[]);
    assert_server_gone(port);
    let stat = slowed.cpu_stat();
    drop(slowed);
    eprintln!(
        "under a quota of 25 ms per 100 ms (load average {load} → {}; cpu.stat {stat}): {}",
        loadavg(),
        measured(&quota)
    );
    assert!(quota.has_finding("over-budget"), "{}", quota.explain());
}

/// `qualify`'s R1 counts its time on the server's clock as the gate's suite budget does (the CI-workflow replay's R1
/// timed out beside a cargo build at normal priority, 2026-12-07): the short suite under a 15 s R1 limit, crowded by
/// two busy loops whose group weighs four times the server's, runs every case with the server's waits for those
/// CPUs given back, and is not timed out; slowed as much by its own CPU quota, R1 times out.
#[test]
fn a_crowded_machine_gives_qualify_r1_its_time_back_and_a_server_slowed_by_its_own_quota_does_not_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manifest = manifest(dir.path(), port);
    // Qualification needs the model's digest (SmolLM2-135M-Instruct Q4_1, as netfault.rs pins it).
    let sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
    let mut text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("path = \"model.gguf\"\n", &format!("path = \"model.gguf\"\nsha256 = \"{sha256}\"\n"));
    assert!(text.contains(sha256), "{text}");
    text.push_str("[profiles.speed.qualify]\ntimeouts = { R1 = \"15s\" }\n");
    std::fs::write(&manifest, text).unwrap();
    let qualify = |out: &str| -> Value {
        let out = dir.path().join(out);
        let args =
            ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
        let home = home();
        let store = dir.path().join("store");
        let env = [("GAUNTLET_STORE", store.to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
        let o = gauntlet(&args, &env, std::time::Duration::from_secs(300));
        let report = std::fs::read_to_string(out.join("qualification.json"))
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        let report: Value = serde_json::from_str(&report).unwrap();
        let mut row = report["stages"].as_array().unwrap().iter().find(|s| s["id"] == "R1").cloned().unwrap();
        // The stage's own file holds its data (the cases, the seconds given back).
        let file = std::fs::read_to_string(out.join(row["file"].as_str().unwrap())).unwrap_or_else(|e| {
            panic!("{e}: {report}\n{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
        });
        row["data"] = serde_json::from_str(&file).unwrap();
        row
    };

    let server_group = Group::new("r1-crowded", None, 1024);
    let hogs_group = Group::new("r1-hogs", None, 4096);
    server_group.select(&manifest);
    let hogs = [hog(&hogs_group), hog(&hogs_group)];
    let load = loadavg();
    let crowded = qualify("crowded");
    drop(hogs);
    assert_server_gone(port);
    drop((server_group, hogs_group));
    eprintln!("R1 crowded (load average {load} → {}): {}", loadavg(), crowded["summary"]);
    assert_eq!(crowded["timed_out"].as_bool(), Some(false), "{crowded}");
    let given = crowded["data"]["given_back_seconds"].as_f64().unwrap_or(0.0);
    assert!(given > 0.0, "{crowded}");
    assert!(crowded["summary"].as_str().unwrap().contains("given back for the server's waits"), "{crowded}");
    let cases = crowded["data"]["cases"].as_array().unwrap();
    assert!(cases.iter().all(|c| c["error"].is_null() && c["skip_reason"].is_null()), "{cases:?}");

    let slowed = Group::new("r1-slowed", Some(25_000), 16 * 1024);
    slowed.select(&manifest);
    let quota = qualify("quota");
    assert_server_gone(port);
    drop(slowed);
    eprintln!("R1 under a quota of 25 ms per 100 ms: {}", quota["summary"]);
    assert_eq!(quota["timed_out"].as_bool(), Some(true), "{quota}");
}

/// Busy, not hung (issue #30; CI 2026-12-06, where vLLM on 2 cores was still prefilling `needle` at its 120 s
/// timeout): a request past its timeout is waited on while the server's threads compute it, and answered. One case
/// whose prompt is about 1500 tokens, prefilled by one thread (several seconds here), under a 1 s request timeout.
/// The idle side (a server whose threads sleep keeps its timeout) is `faults::lifecycle::hang_before_first_byte…`.
#[test]
fn a_request_past_its_timeout_is_waited_on_while_the_server_computes_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manifest = manifest_with(dir.path(), port, ("request_timeout = \"120s\"", "request_timeout = \"1s\""));
    let words = "apple river stone candle window garden silver morning ".repeat(190);
    let suite = format!(
        "id = \"long\"\nversion = 1\n[[cases]]\nid = \"long\"\nmax_tokens = 16\nmessages = [{{ role = \"user\", content = \
         \"Here is a list of words: {words}. Which word comes first?\" }}]\ncheck = {{ min_words = 1 }}\n"
    );
    std::fs::write(dir.path().join("suite.toml"), suite).unwrap();
    // The server stays in the root CPU group (the wrapper wants one named).
    std::fs::write(dir.path().join("cpu-group"), "/sys/fs/cgroup/cpu\n").unwrap();

    let run = run_profile(&manifest, &dir.path().join("out"), &[]);
    assert_server_gone(port);
    let case = run.case("long");
    let seconds = case["seconds"].as_f64().unwrap_or(0.0);
    eprintln!("the long prompt was answered in {seconds:.1}s: {}", run.explain());
    // Answered (what it says is not the question here; its one check is judged as usual).
    assert!(["pass", "fail"].contains(&case["status"].as_str().unwrap()), "{}", run.explain());
    assert!(case["answer"].is_object() && case["error"].is_null(), "{case}");
    assert!(!run.has_finding("request-error"), "{}", run.explain());
    assert!(seconds > 2.0, "the prefill must outlast the 1 s timeout for this test to say anything: {seconds}");
    let events = run.record.as_ref().unwrap()["server"]["events"].as_array().cloned().unwrap_or_default();
    let busy: Vec<&Value> = events.iter().filter(|e| e["kind"] == "busy-past-timeout").collect();
    assert_eq!(busy.len(), 1, "{events:?}");
    let detail = busy[0]["detail"].as_str().unwrap();
    assert!(detail.starts_with("case `long`: at its 1s request timeout the server was working"), "{detail}");
}
