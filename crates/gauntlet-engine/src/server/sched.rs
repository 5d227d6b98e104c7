//! What the kernel's scheduler says about a spawned server: each thread's time on a CPU and time runnable but
//! waiting for one (`/proc/PID/task/TID/schedstat`), and the throttled time of the server's CPU group
//! (`cpu.stat` of its cgroup-v1 `cpu` controller group, or of its cgroup-v2 group). The gate reads it before and
//! after each case ([`Sample`], [`Sample::since`]) to tell a server that got slower from one that waited for CPUs
//! other processes held.
//!
//! Each sample also reads the machine's CPU time (`/proc/stat`) and gauntlet's own (`/proc/self/stat`), so that an
//! account says what share of the CPU time the server left other processes used ([`Account::neighbours`]). On a
//! machine whose CPUs share caches and memory, a neighbour's work makes each CPU second of the server buy less
//! (measured on a 2-core VM: a cargo build or a memory-streaming `dd` beside a one-thread llama.cpp made its CPU
//! time per token 0–35 % longer, with no wait in its schedstat), which no counter of the server shows.
//!
//! Everything here is read from files the server's processes (or the machine) control: bounded, parsed without
//! trust. A thread that vanished between two samples is left out; text that does not parse gives no measurement,
//! never a panic. Never writes, never signals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::util::bounded::read_text;

/// schedstat is one line of three numbers; cpu.stat a handful of `key value` lines. Anything longer is not them.
const SCHEDSTAT_CAP: u64 = 256;
const CPU_STAT_CAP: u64 = 4096;
const CGROUP_CAP: u64 = 16 << 10;
const MOUNTINFO_CAP: u64 = 1 << 20;
/// `/proc/stat` has a line per CPU and a few more; its first line is the machine's. A 1,024-CPU host is under
/// 128 KiB; only the first line is parsed.
const PROC_STAT_CAP: u64 = 256 << 10;
const SELF_STAT_CAP: u64 = 4096;
/// Threads read per process: a server with more is sampled on its first this-many (the kernel lists them in order).
const THREADS_CAP: usize = 4096;
/// A thread counts as sharing the decode when it ran at least this share of the busiest thread's CPU time.
const BUSY_SHARE: f64 = 0.25;

/// The first two fields of a schedstat line: nanoseconds on a CPU, nanoseconds runnable and waiting for one. None
/// unless both are plain integers.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_ascii_whitespace();
    let cpu = fields.next()?.parse().ok()?;
    let wait = fields.next()?.parse().ok()?;
    Some((cpu, wait))
}

/// Nanoseconds a group was throttled, from its `cpu.stat`: `throttled_time` (cgroup v1, ns) or `throttled_usec`
/// (v2, µs). None when neither key holds a plain integer.
pub fn parse_throttled(cpu_stat: &str) -> Option<u64> {
    for line in cpu_stat.lines() {
        let mut kv = line.split_ascii_whitespace();
        match (kv.next(), kv.next(), kv.next()) {
            (Some("throttled_time"), Some(v), None) => return v.parse().ok(),
            (Some("throttled_usec"), Some(v), None) => return v.parse::<u64>().ok()?.checked_mul(1000),
            _ => {}
        }
    }
    None
}

/// The directory of the CPU group a process is in, from its `/proc/PID/cgroup` text and `/proc/self/mountinfo`:
/// the cgroup-v1 hierarchy that carries the `cpu` controller, else the v2 group (where `cpu.stat` always exists).
/// None when the group is outside the mount this process sees, or its path leaves it (`..`).
pub fn cpu_group_dir(proc_cgroup: &str, mountinfo: &str) -> Option<PathBuf> {
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == "cpu") {
            return mounted(mountinfo, path, |fstype, options| {
                fstype == "cgroup" && options.split(',').any(|o| o == "cpu")
            });
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        }
    }
    mounted(mountinfo, v2?, |fstype, _| fstype == "cgroup2")
}

/// `path` (a group as `/proc/PID/cgroup` names it) under the first mount that `hit` accepts (by its filesystem type
/// and super options).
fn mounted(mountinfo: &str, path: &str, hit: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    if path.split('/').any(|c| c == "..") {
        return None;
    }
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (Some(fstype), _, Some(options)) = (after.next(), after.next(), after.next()) else { continue };
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else { continue };
        if !hit(fstype, options) {
            continue;
        }
        let rel = path.strip_prefix(root.trim_end_matches('/'))?;
        if !rel.is_empty() && !rel.starts_with('/') {
            return None;
        }
        return Some(PathBuf::from(format!("{point}{rel}")));
    }
    None
}

/// The CPU group `pid` is in now, as a directory; None where it cannot be told.
pub fn cpu_group_of(pid: i32) -> Option<PathBuf> {
    let own = read_text(Path::new(&format!("/proc/{pid}/cgroup")), CGROUP_CAP).ok()?;
    let mounts = read_text(Path::new("/proc/self/mountinfo"), MOUNTINFO_CAP).ok()?;
    cpu_group_dir(&own, &mounts)
}

/// The machine's CPU time from the first (`cpu`) line of `/proc/stat`, in clock ticks: (busy, total). Busy is user,
/// nice, system, irq and softirq (guest time is counted inside user); total adds idle and iowait. Steal (time a
/// hypervisor gave this machine's CPUs to others) is in neither: nothing here ran then. None unless the line has
/// at least the eight numbers.
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?;
    let mut fields = line.split_ascii_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, _steal] = v[..] else { return None };
    let busy = user.checked_add(nice)?.checked_add(system)?.checked_add(irq)?.checked_add(softirq)?;
    Some((busy, busy.checked_add(idle)?.checked_add(iowait)?))
}

/// A process's CPU time (utime + stime, clock ticks, all its threads) from its `/proc/PID/stat` text: fields 14 and
/// 15, counted after the command name's closing parenthesis (the name may hold spaces and parentheses).
pub fn parse_process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The machine's CPU ticks and gauntlet's own, at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    busy: u64,
    total: u64,
    own: u64,
    /// Clock ticks per second (`_SC_CLK_TCK`).
    hz: u64,
}

impl Machine {
    /// The machine's counters now; None where `/proc` does not give them.
    pub fn now() -> Option<Machine> {
        let (busy, total) = parse_proc_stat(&read_text(Path::new("/proc/stat"), PROC_STAT_CAP).ok()?)?;
        let own = parse_process_ticks(&read_text(Path::new("/proc/self/stat"), SELF_STAT_CAP).ok()?)?;
        // SAFETY: sysconf reads a constant of the C library; no memory is passed.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (hz > 0).then_some(Machine { busy, total, own, hz: hz as u64 })
    }

    /// The share of the CPU time that the server (`server_ns` of CPU time since this reading) and gauntlet left
    /// that other processes used from this reading until now ([`neighbours`]).
    pub fn neighbours_until_now(&self, server_ns: u64) -> Option<f64> {
        neighbours(self, &Machine::now()?, server_ns)
    }
}

/// The share of the CPU time the server and gauntlet left that other processes used between two machine readings,
/// 0–1: (machine busy − server − gauntlet) / (machine total − server − gauntlet), every term the change between
/// the readings (`server_ns`: the server's threads' time on a CPU). None when a counter went backwards, or less
/// than one tick was left to share.
fn neighbours(before: &Machine, after: &Machine, server_ns: u64) -> Option<f64> {
    if before.hz != after.hz {
        return None;
    }
    let busy = after.busy.checked_sub(before.busy)? as f64;
    let total = after.total.checked_sub(before.total)? as f64;
    let own = after.own.checked_sub(before.own)? as f64;
    let server = server_ns as f64 * after.hz as f64 / 1e9;
    let left = total - server - own;
    if left.is_nan() || left < 1.0 {
        return None;
    }
    Some(((busy - server - own) / left).clamp(0.0, 1.0))
}

/// Nanoseconds `group` has been throttled since it was made; None when its `cpu.stat` is unreadable or says none.
pub fn throttled_ns(group: &Path) -> Option<u64> {
    parse_throttled(&read_text(&group.join("cpu.stat"), CPU_STAT_CAP).ok()?)
}

/// A thread: its process and its id.
type Thread = (i32, i32);

/// One moment's schedstat of every thread of some processes, and their CPU group's throttled time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// (pid, tid) → (ns on a CPU, ns waiting for one), both since the thread started.
    threads: HashMap<Thread, (u64, u64)>,
    /// The CPU group and its throttled ns, when readable.
    group: Option<(PathBuf, u64)>,
    /// The machine's CPU time and gauntlet's own, when readable.
    machine: Option<Machine>,
}

/// What the busy threads did between two samples: those that ran at least a quarter of the busiest one's CPU time
/// (every thread when none ran).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Account {
    pub cpu_ns: u64,
    pub wait_ns: u64,
    /// 0 without a readable group, or when the group changed between the samples.
    pub throttled_ns: u64,
    pub busy_threads: u32,
    /// The share of the CPU time the server's threads (all of them) and gauntlet left that other processes used,
    /// 0–1; None when the machine's counters were not readable.
    pub neighbours: Option<f64>,
}

impl Sample {
    /// Every thread of `pids` now, and `group`'s throttled time when one is given.
    pub fn take(pids: &[i32], group: Option<&Path>) -> Sample {
        let mut threads = HashMap::new();
        for &pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for task in tasks.flatten().take(THREADS_CAP) {
                let Some(tid) = task.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
                let Ok(text) = read_text(&task.path().join("schedstat"), SCHEDSTAT_CAP) else { continue };
                if let Some(v) = parse_schedstat(&text) {
                    threads.insert((pid, tid), v);
                }
            }
        }
        let group = group.and_then(|g| Some((g.to_owned(), throttled_ns(g)?)));
        Sample { threads, group, machine: Machine::now() }
    }

    /// No thread was read.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Nanoseconds every sampled thread has waited for a CPU since it started, summed (threads that wait side by
    /// side each count): the load's account, where every thread's start is in the measured span.
    pub fn total_wait_ns(&self) -> u64 {
        self.threads.values().fold(0u64, |a, (_, w)| a.saturating_add(*w))
    }

    /// The group whose throttled time this sample holds.
    pub fn group(&self) -> Option<&Path> {
        self.group.as_ref().map(|(g, _)| g.as_path())
    }

    /// The most nanoseconds one thread spent on a CPU or waiting for one between `before` and this sample (a thread
    /// new since `before` counts whole): a server computing keeps at least one thread there nearly all the time, an
    /// idle one's threads sleep. None when no thread was seen or a counter went backwards.
    pub fn busiest_since(&self, before: &Sample) -> Option<u64> {
        let mut most = None;
        for (key, &(c, w)) in &self.threads {
            let (c0, w0) = before.threads.get(key).copied().unwrap_or((0, 0));
            let ran = c.checked_sub(c0)?.saturating_add(w.checked_sub(w0)?);
            most = Some(most.map_or(ran, |m: u64| m.max(ran)));
        }
        most
    }

    /// What happened between `before` and this sample: summed over the busy threads in this sample (a thread new
    /// since `before` counts whole; one that vanished is lost). None when no thread was seen, or a counter went
    /// backwards (a reused thread id, or not the same kernel's numbers).
    pub fn since(&self, before: &Sample) -> Option<Account> {
        if self.threads.is_empty() {
            return None;
        }
        let mut deltas: Vec<(u64, u64)> = Vec::with_capacity(self.threads.len());
        for (key, &(c, w)) in &self.threads {
            let (c0, w0) = before.threads.get(key).copied().unwrap_or((0, 0));
            deltas.push((c.checked_sub(c0)?, w.checked_sub(w0)?));
        }
        let throttled_ns = match (&self.group, &before.group) {
            (Some((g, t)), Some((g0, t0))) if g == g0 => t.checked_sub(*t0)?,
            _ => 0,
        };
        // The threads that did the work; the others (an HTTP listener, a logger) wait and run on their own schedule,
        // which says nothing of how long the work took.
        let busiest = deltas.iter().map(|d| d.0).max().unwrap_or(0);
        let server_ns = deltas.iter().fold(0u64, |a, d| a.saturating_add(d.0));
        let neighbours = match (&before.machine, &self.machine) {
            (Some(b), Some(a)) => neighbours(b, a, server_ns),
            _ => None,
        };
        let busy: Vec<&(u64, u64)> =
            deltas.iter().filter(|d| busiest == 0 || d.0 as f64 >= BUSY_SHARE * busiest as f64).collect();
        Some(Account {
            cpu_ns: busy.iter().fold(0u64, |a, d| a.saturating_add(d.0)),
            wait_ns: busy.iter().fold(0u64, |a, d| a.saturating_add(d.1)),
            throttled_ns,
            busy_threads: if busiest == 0 { 0 } else { busy.len() as u32 },
            neighbours,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The busiest thread is the one most on or waiting for a CPU, however many others tick a little.
    #[test]
    fn the_busiest_thread_is_the_one_most_on_or_waiting_for_a_cpu() {
        let before = sample(&[((1, 1), (100, 50)), ((1, 2), (0, 0)), ((1, 3), (10, 10))], None);
        let after = sample(&[((1, 1), (150, 60)), ((1, 2), (20, 30)), ((1, 3), (15, 12)), ((1, 4), (5, 1))], None);
        assert_eq!(after.busiest_since(&before), Some(60), "thread 1: 50 on a CPU and 10 waiting");
        assert_eq!(sample(&[], None).busiest_since(&before), None);
        let backwards = sample(&[((1, 1), (90, 60))], None);
        assert_eq!(backwards.busiest_since(&before), None, "a counter that went back is no measurement");
    }

    #[test]
    fn schedstat_is_two_integers_or_nothing() {
        assert_eq!(parse_schedstat("49507406 39155899 155\n"), Some((49507406, 39155899)));
        assert_eq!(parse_schedstat("12 34"), Some((12, 34)));
        for bad in ["", "12", "12 -3 1", "1.5 2 3", "x y z", "18446744073709551616 1 1"] {
            assert_eq!(parse_schedstat(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn throttled_time_is_read_from_v1_and_v2_cpu_stat() {
        let v1 = "nr_periods 1239\nnr_throttled 950\nthrottled_time 37912345678\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(parse_throttled(v1), Some(37_912_345_678));
        let v2 = "usage_usec 100\nuser_usec 80\nsystem_usec 20\nnr_periods 4\nnr_throttled 1\nthrottled_usec 2500\n";
        assert_eq!(parse_throttled(v2), Some(2_500_000));
        for bad in ["", "nr_periods 3\n", "throttled_time\n", "throttled_time 1 2\n", "throttled_time -5\n"] {
            assert_eq!(parse_throttled(bad), None, "{bad:?}");
        }
        assert_eq!(parse_throttled("throttled_usec 18446744073709551615\n"), None, "overflows as ns");
    }

    const MOUNTS: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_cpu_group_is_found_under_its_mount() {
        let own = "2:cpuacct:/\n1:cpu:/gauntlet-speed-test-1-quota\n0::/\n";
        assert_eq!(cpu_group_dir(own, MOUNTS), Some(PathBuf::from("/sys/fs/cgroup/cpu/gauntlet-speed-test-1-quota")));
        // cpu,cpuacct mounted together, as most distributions do.
        let joint = "40 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert_eq!(cpu_group_dir("4:cpu,cpuacct:/a\n", joint), Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/a")));
        // No v1 cpu controller: the v2 group.
        assert_eq!(cpu_group_dir("0::/user.slice\n", MOUNTS), Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice")));
        // Outside the mount, leaving it, unmounted, malformed: nothing.
        let inner = "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(cpu_group_dir("1:cpu:/elsewhere\n", inner), None);
        assert_eq!(cpu_group_dir("1:cpu:/a/../../etc\n", MOUNTS), None);
        assert_eq!(cpu_group_dir("1:cpu:/a\n", ""), None);
        assert_eq!(cpu_group_dir("garbage", MOUNTS), None);
    }

    fn sample(threads: &[(Thread, (u64, u64))], group: Option<u64>) -> Sample {
        Sample {
            threads: threads.iter().copied().collect(),
            group: group.map(|t| (PathBuf::from("/g"), t)),
            machine: None,
        }
    }

    #[test]
    fn an_account_sums_what_each_thread_did_between_two_samples() {
        // Thread 11 decodes, 12 serves HTTP, 13 started during the case, 14 vanished.
        let before = sample(&[((10, 11), (1_000, 500)), ((10, 12), (100, 10)), ((10, 14), (5, 5))], Some(7_000));
        let after =
            sample(&[((10, 11), (801_000, 300_500)), ((10, 12), (20_100, 1_010)), ((10, 13), (4, 0))], Some(57_000));
        let a = after.since(&before).unwrap();
        // Only the decoding thread is busy (the others ran under a quarter of its 800 µs): its own time and wait.
        assert_eq!(
            a,
            Account { cpu_ns: 800_000, wait_ns: 300_000, throttled_ns: 50_000, busy_threads: 1, neighbours: None }
        );
        // Two threads sharing the work.
        let two = sample(&[((10, 11), (801_000, 500)), ((10, 12), (600_100, 10))], None);
        assert_eq!(two.since(&before).unwrap().busy_threads, 2);
        assert_eq!(two.since(&before).unwrap().cpu_ns, 800_000 + 600_000);
        assert_eq!(two.since(&before).unwrap().throttled_ns, 0, "no group now: nothing counts as throttled");
        // A counter that went backwards, or no thread at all: no account.
        assert_eq!(before.since(&after), None);
        assert_eq!(sample(&[], Some(1)).since(&before), None);
        // The load's account sums every thread's wait, busy or not.
        assert_eq!(after.total_wait_ns(), 300_500 + 1_010);
    }

    #[test]
    fn the_machine_line_of_proc_stat_gives_busy_and_total_ticks() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let text = "cpu  100 5 40 800 20 3 2 50 7 0\ncpu0 50 2 20 400 10 1 1 25 3 0\nintr 1 2 3\n";
        assert_eq!(parse_proc_stat(text), Some((150, 970)), "steal is neither busy nor idle; guest is in user");
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n"), None, "the first line must be the machine's");
        for bad in ["", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8", "cpu -1 2 3 4 5 6 7 8"] {
            assert_eq!(parse_proc_stat(bad), None, "{bad:?}");
        }
        let overflow = format!("cpu {} 1 0 0 0 0 0 0", u64::MAX);
        assert_eq!(parse_proc_stat(&overflow), None);
    }

    #[test]
    fn a_process_s_ticks_are_read_after_its_name() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 3 0 1000 0 0";
        assert_eq!(parse_process_ticks(stat), Some(280), "utime 250 + stime 30, after the last `)`");
        assert_eq!(parse_process_ticks("42 (x) S 1 2"), None);
        assert_eq!(parse_process_ticks("no parenthesis 1 2 3"), None);
        let own = read_text(Path::new("/proc/self/stat"), SELF_STAT_CAP).unwrap();
        assert!(parse_process_ticks(&own).is_some(), "{own}");
    }

    #[test]
    fn neighbours_are_the_share_of_the_cpu_time_the_server_and_gauntlet_left() {
        let at = |busy, total, own| Machine { busy, total, own, hz: 100 };
        // Two CPUs for one second (200 ticks): the server ran 0.9 s (90 ticks), gauntlet 5 ticks, the machine was
        // busy 195 ticks: the other 100 were someone else's, of the 105 left.
        let share = neighbours(&at(1_000, 10_000, 50), &at(1_195, 10_200, 55), 900_000_000).unwrap();
        assert!((share - 100.0 / 105.0).abs() < 1e-12, "{share}");
        // A quiet machine: busy only with the server and gauntlet.
        assert_eq!(neighbours(&at(1_000, 10_000, 50), &at(1_095, 10_200, 55), 900_000_000), Some(0.0));
        // Tick rounding can make the server's nanoseconds exceed the machine's busy ticks: clamped, not negative.
        assert_eq!(neighbours(&at(0, 0, 0), &at(90, 200, 0), 950_000_000), Some(0.0));
        // Counters that went backwards, a different clock, or nothing left to share: no measurement.
        assert_eq!(neighbours(&at(10, 10, 0), &at(5, 200, 0), 0), None);
        assert_eq!(neighbours(&at(0, 0, 0), &Machine { hz: 1000, ..at(10, 200, 0) }, 0), None);
        assert_eq!(neighbours(&at(0, 0, 0), &at(100, 100, 0), 1_000_000_000), None);
        // Between two real samples of this process, the machine was read.
        let a = Sample::take(&[std::process::id() as i32], None);
        let b = Sample::take(&[std::process::id() as i32], None);
        assert!(a.machine.is_some() && b.machine.is_some());
    }

    #[test]
    fn this_process_can_be_sampled() {
        let me = std::process::id() as i32;
        let burn = |s: &Sample| s.threads.len();
        let a = Sample::take(&[me], None);
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = Sample::take(&[me], None);
        // Where the kernel keeps schedstat (it does on Linux ≥ 2.6 with CONFIG_SCHED_INFO), the burn shows.
        if burn(&a) > 0 {
            assert!(b.since(&a).unwrap().cpu_ns > 0);
        }
        assert_eq!(Sample::take(&[i32::MAX], None).threads.len(), 0, "a process that does not exist");
    }
}
