//! The gate's speed check on the real embedded default, on whatever machine runs it (a shared runner, a build
//! beside it): an unchanged re-run does not warn on speed, and the same server slowed by a known amount does. The
//! slowdown is a cgroup-v1 CPU quota (`/sys/fs/cgroup/cpu`, as `scripts/soak.sh --quota` uses) of 70 % of the
//! CPU the server and gauntlet used per second of the baseline run (measured with `cpuacct`), so it slows decode
//! by about 30 % whatever else the machine does. Nothing here is timed: the test asserts findings and verdicts.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{assert_server_gone, home, run_profile};
use crate::common::{Run, free_port};

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
fn an_unchanged_rerun_does_not_warn_on_speed_and_a_cpu_quota_does() {
    assert!(home().join("bin/xllamacpp-server").is_file(), "run scripts/setup.sh first");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let baseline = dir.path().join("baseline.json");
    let port = free_port();

    let measured = Group::new("baseline", None);
    let first = measured.run(|| {
        run_profile(
            "default",
            port,
            &dir.path().join("first"),
            &["--write-baseline", baseline.to_str().unwrap()],
            &store,
        )
    });
    assert_server_gone(port);
    assert!(baseline.is_file(), "{}", first.explain());
    let wall = first.record.as_ref().unwrap()["wall_seconds"].as_f64().unwrap();
    let cores = measured.cpu_seconds() / wall;
    drop(measured);

    let second =
        run_profile("default", port, &dir.path().join("second"), &["--baseline", baseline.to_str().unwrap()], &store);
    assert_server_gone(port);
    let unchanged = speed_findings(&second);
    eprintln!("unchanged re-run: {} {unchanged:?}", second.verdict());
    assert!(!warned(&unchanged, "slow-decode") && !warned(&unchanged, "slow-load"), "{}", second.explain());

    // 70 % of what the baseline run used: about a 30 % slower decode.
    let quota_us = ((cores * 0.7 * 100_000.0) as u64).max(1000);
    let slowed = Group::new("quota", Some(quota_us));
    let third = slowed.run(|| {
        run_profile("default", port, &dir.path().join("third"), &["--baseline", baseline.to_str().unwrap()], &store)
    });
    assert_server_gone(port);
    drop(slowed);
    let quota = speed_findings(&third);
    eprintln!("under a quota of {quota_us} µs per 100 ms ({cores:.2} cores used by the baseline): {quota:?}");
    assert!(warned(&quota, "slow-decode"), "a 30 % slower server must warn: {quota:?}\n{}", third.explain());
}
