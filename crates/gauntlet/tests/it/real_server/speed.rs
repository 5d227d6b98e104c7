//! The gate's speed check on the real embedded default's server and model (its launcher, SmolLM2-135M, its server
//! arguments) with a short suite of eight answers of 16 tokens (the default suite's long-prompt case alone takes
//! minutes on a busy 2-core runner), on whatever machine runs it (a shared runner, a build beside it): an
//! unchanged re-run does not warn on speed, and the same server slowed by a known amount does. The
//! slowdown is a cgroup-v1 CPU quota (`/sys/fs/cgroup/cpu`, as `scripts/soak.sh --quota` uses) of 70 % of the
//! CPU the server and gauntlet used per second of the baseline run (measured with `cpuacct`), so it slows decode
//! by about 30 % whatever else the machine does. All three runs are in a cgroup of their own (one scheduling
//! entity each), so only the quota differs. Nothing here is timed: the test asserts findings and verdicts.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{assert_server_gone, home};
use crate::common::{Run, finish, free_port, gauntlet};

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Eight prompts that each decode their 16 tokens; a check every answer passes (speed is what is judged).
fn suite() -> String {
    let mut s = String::from("id = \"speed\"\nversion = 1\n");
    for (i, topic) in
        ["the sea", "a cat", "the moon", "bread", "a river", "winter", "a library", "the wind"].iter().enumerate()
    {
        s.push_str(&format!(
            "[[cases]]\nid = \"s{i}\"\nmax_tokens = 16\nmessages = [{{ role = \"user\", content = \"Write two \
             sentences about {topic}.\" }}]\ncheck = {{ min_words = 3 }}\n"
        ));
    }
    s
}

/// A manifest in `dir`: the embedded default's model and server (linked from gauntlet's home) and its server
/// arguments, with the short suite.
fn manifest(dir: &Path, port: u16) -> PathBuf {
    let home = home();
    for (link, target) in [("model.gguf", home.join(MODEL)), ("xllamacpp-server", home.join("bin/xllamacpp-server"))] {
        assert!(target.exists(), "{} is missing: run scripts/setup.sh", target.display());
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
    }
    std::fs::write(dir.join("suite.toml"), suite()).unwrap();
    let text = format!(
        "version = 1\n[models.smol]\npath = \"model.gguf\"\n[servers.xllamacpp]\nbinary = \"xllamacpp-server\"\n\
         [profiles.speed]\nmodel = \"smol\"\nserver = \"xllamacpp\"\nport = {port}\nsuite = \"suite.toml\"\n\
         server_arguments = [\"-c\", \"4096\", \"-np\", \"1\"]\nload_timeout = \"120s\"\nrequest_timeout = \"120s\"\n\
         suite_budget = \"600s\"\nstop_grace = \"10s\"\n"
    );
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
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

/// A cgroup in the `cpu` and `cpuacct` hierarchies, removed on drop (once its tasks have exited).
struct Group {
    dirs: Vec<PathBuf>,
}

impl Group {
    fn new(name: &str, quota_us: Option<u64>) -> Group {
        let name = format!("gauntlet-speed-test-{}-{name}", std::process::id());
        let dirs: Vec<PathBuf> =
            ["cpu", "cpuacct"].iter().map(|c| Path::new("/sys/fs/cgroup").join(c).join(&name)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap_or_else(|e| {
                panic!("this test needs a writable cgroup-v1 cpu and cpuacct hierarchy ({}): {e}", d.display())
            });
        }
        std::fs::write(dirs[0].join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(dirs[0].join("cpu.cfs_quota_us"), quota_us.map_or("-1".into(), |q| q.to_string())).unwrap();
        Group { dirs }
    }

    /// Runs `f` on a thread of its own that first joins the group (in cgroup v1 `tasks` moves one thread): what it
    /// spawns (gauntlet, and gauntlet's server) starts inside.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                for d in &self.dirs {
                    std::fs::write(d.join("tasks"), "0").unwrap();
                }
                f()
            })
            .join()
            .unwrap()
        })
    }

    fn cpu_seconds(&self) -> f64 {
        let text = std::fs::read_to_string(self.dirs[1].join("cpuacct.usage")).unwrap();
        text.trim().parse::<f64>().unwrap() / 1e9
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for d in &self.dirs {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::fs::remove_dir(d).is_err() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

fn speed_findings(run: &Run) -> Vec<Value> {
    let record = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| ["slow-decode", "slow-load", "speed-unsettled"].contains(&f["kind"].as_str().unwrap_or("")))
        .cloned()
        .collect()
}

fn warned(findings: &[Value], kind: &str) -> bool {
    findings.iter().any(|f| f["kind"] == kind && f["severity"] == "warn")
}

#[test]
#[ignore = "unfinished (#30 item 5): at load average 28-30 the unchanged half passed but a quota of 70 % of the \
            baseline's CPU did not warn; on 2026-12-05 at load 13-16 the server's own decode swung 0.4-3.9 tok/s \
            between unchanged runs and the quota run did not finish in 10 min (docs/validation/2026-12-05-speed.md)"]
fn an_unchanged_rerun_does_not_warn_on_speed_and_a_cpu_quota_does() {
    assert!(home().join("bin/xllamacpp-server").is_file(), "run scripts/setup.sh first");
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    let port = free_port();
    let manifest = manifest(dir.path(), port);

    let measured = Group::new("baseline", None);
    let first = measured
        .run(|| run_profile(&manifest, &dir.path().join("first"), &["--write-baseline", baseline.to_str().unwrap()]));
    assert_server_gone(port);
    assert!(baseline.is_file(), "{}", first.explain());
    assert_eq!(first.record.as_ref().unwrap()["decode"]["cases_counted"], 0, "16 tokens: under the median's 32");
    let wall = first.record.as_ref().unwrap()["wall_seconds"].as_f64().unwrap();
    let cores = measured.cpu_seconds() / wall;
    drop(measured);

    // Every run in a group of its own: a cgroup is one entity to the scheduler (its threads share one weight), so
    // the unchanged re-run and the slowed one differ from the baseline by the quota alone.
    let same = Group::new("unchanged", None);
    let second =
        same.run(|| run_profile(&manifest, &dir.path().join("second"), &["--baseline", baseline.to_str().unwrap()]));
    drop(same);
    assert_server_gone(port);
    let unchanged = speed_findings(&second);
    eprintln!("unchanged re-run: {} {unchanged:?}", second.verdict());
    assert!(!warned(&unchanged, "slow-decode") && !warned(&unchanged, "slow-load"), "{}", second.explain());

    // 70 % of what the baseline run used: about a 30 % slower decode.
    let quota_us = ((cores * 0.7 * 100_000.0) as u64).max(1000);
    let slowed = Group::new("quota", Some(quota_us));
    let third =
        slowed.run(|| run_profile(&manifest, &dir.path().join("third"), &["--baseline", baseline.to_str().unwrap()]));
    assert_server_gone(port);
    drop(slowed);
    let quota = speed_findings(&third);
    eprintln!("under a quota of {quota_us} µs per 100 ms ({cores:.2} cores used by the baseline): {quota:?}");
    assert!(warned(&quota, "slow-decode"), "a 30 % slower server must warn: {quota:?}\n{}", third.explain());
}
