//! Busy, not hung. A request timeout is a guess at how long an answer takes; on a slow or crowded machine a long
//! prompt can outlast it while the server computes the whole time (vLLM on 2 CPU cores prefilling `needle`'s 4000
//! tokens past 120 s, 2026-12-06). When a spawned server's request passes its deadline, [`BusyPatience`] reads
//! what the server's threads did since it last looked (the kernel's schedstat, [`crate::server::sched`]): a thread
//! that kept running or waiting for a CPU is a server at work, so the wait goes on a step at a time; threads asleep
//! are a server that is not working on the request, and the timeout stands. Bounded whatever the server does: never past
//! the caller's cap, the limit the user gave the whole (the gate's suite budget, a qualification stage's time).
//!
//! An attached server on this machine is read through the processes that listen on its port and their descendants
//! (vLLM's engine core and worker are its children). One elsewhere (another host, a container's PID namespace)
//! cannot be read: its request timeout is the deadline, and the description says why.

use std::time::{Duration, Instant};

use crate::client::Patience;
use crate::server::ServerProcess;
use crate::server::sched::Sample;

/// A server is working when one of its threads was on a CPU or waiting for one at least this share of the time since
/// the last look. Measured on 2026-12-06 (2-core AMD EPYC, 5 s windows): an idle vLLM's 72 threads each read at most
/// 0.02 (0.07–0.22 summed, so a sum would call it working), an idle llama.cpp server's 0.0001; vLLM prefilling
/// `needle` 0.99; and a thread under a CPU quota of 25 % still reads 1.0 (0.25 running, 0.75 waiting: this kernel
/// counts throttled time as waiting).
const WORKING_SHARE: f64 = 0.5;

/// Whose threads a patience reads.
#[derive(Debug, Clone, Copy)]
pub enum Threads<'a> {
    /// A started server: its process group and CPU group.
    Spawned(&'a ServerProcess),
    /// An attached server on this machine: the processes listening on its port, with their descendants.
    Attached(&'a [i32]),
    /// An attached server whose processes this machine cannot see.
    Unreadable,
}

/// A time budget counted on the server's clock (the gate's suite budget, qualify's R1): the seconds the server's
/// threads waited for CPUs that other processes held (a build beside it on a shared runner) are given back to it,
/// up to [`Budget::STRETCH_MAX`] times the budget in all, so that a busy machine does not fail an unchanged server
/// over its time while a server that is itself slower still does, and the whole still ends.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    started: Instant,
    budget: Duration,
    credit: Duration,
}

impl Budget {
    /// How far a budget stretches on a busy machine, as a multiple of itself.
    pub const STRETCH_MAX: f64 = 3.0;

    /// A budget of `budget` from now.
    pub fn new(budget: Duration) -> Budget {
        Budget { started: Instant::now(), budget, credit: Duration::ZERO }
    }

    /// A budget that ends at `end` unless time is given back.
    pub fn until(end: Instant) -> Budget {
        Budget::new(end.saturating_duration_since(Instant::now()))
    }

    /// Gives back `share` (0 to 1: the server's wait for other processes' CPUs, `compare::speed::contention`) of
    /// `wall`.
    pub fn give_back(&mut self, wall: Duration, share: f64) {
        if share.is_finite() && share > 0.0 {
            self.credit += wall.mul_f64(share.min(1.0));
        }
    }

    /// When the budget ends now: its start, its length and what was given back, never past [`Budget::cap`].
    pub fn deadline(&self) -> Instant {
        (self.started + self.budget + self.credit).min(self.cap())
    }

    /// The latest it can end: [`Budget::STRETCH_MAX`] times the budget after its start.
    pub fn cap(&self) -> Instant {
        self.started + self.budget.mul_f64(Self::STRETCH_MAX)
    }

    /// The seconds given back so far.
    pub fn credit(&self) -> Duration {
        self.credit
    }
}

impl Threads<'_> {
    /// What the server's threads have done since they started (`None` where they cannot be read).
    pub fn sample(&self) -> Option<Sample> {
        match self {
            Threads::Spawned(p) => Some(p.sched_sample()),
            Threads::Attached(listeners) => {
                Some(Sample::take(&crate::server::process_tree(listeners), None)).filter(|s| !s.is_empty())
            }
            Threads::Unreadable => None,
        }
    }
}

/// What the server's threads were doing at one passed deadline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    /// Seconds since the request was sent.
    pub at_seconds: f64,
    /// The share of the time since the previous look (or the request's start) that the server's busiest thread was
    /// on a CPU or waiting for one.
    pub busiest_share: f64,
}

/// Patience for one request to a spawned server (see the module's text). `extend` is asked by the client each time
/// the deadline passes.
pub struct BusyPatience<'a> {
    threads: Threads<'a>,
    sent: Instant,
    timeout: Duration,
    step: Duration,
    cap: Instant,
    last: Option<(Instant, Sample)>,
    looks: Vec<Look>,
    /// Whether the threads could be read when the request was sent.
    readable: bool,
    /// Why the last look ended the wait, when it did.
    ended: Option<String>,
}

impl<'a> BusyPatience<'a> {
    /// For a request sent now with `timeout`, to the server whose `threads` are read, never waiting past `cap`.
    /// While the server works, it looks again every quarter of the timeout (1 to 30 s).
    pub fn new(threads: Threads<'a>, timeout: Duration, cap: Instant) -> BusyPatience<'a> {
        let sent = Instant::now();
        let step = (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
        let last = threads.sample().map(|s| (sent, s));
        BusyPatience {
            threads,
            sent,
            timeout,
            step,
            cap,
            readable: last.is_some(),
            last,
            looks: Vec::new(),
            ended: None,
        }
    }

    /// Each passed deadline's look, in order.
    pub fn looks(&self) -> &[Look] {
        &self.looks
    }

    /// One line for a request that passed its timeout: what the looks saw and why the wait ended (None when the
    /// timeout never passed). Appended to the request's error or finding.
    pub fn describe(&self) -> Option<String> {
        let timeout = humantime::format_duration(Duration::from_secs(self.timeout.as_secs()));
        if !self.readable {
            return self.ended.as_ref().map(|_| {
                format!(
                    "this server's threads cannot be read from here (not on this machine, or in another PID \
                     namespace), so its {timeout} request timeout is the deadline"
                )
            });
        }
        let first = self.looks.first()?;
        let busy = self.looks.iter().filter(|l| l.busiest_share >= WORKING_SHARE).count();
        let mut line = format!(
            "at its {timeout} request timeout the server was {} (its busiest thread on or waiting for a CPU {:.0} % of \
             the time)",
            if first.busiest_share >= WORKING_SHARE { "working" } else { "idle" },
            first.busiest_share * 100.0
        );
        if busy > 0 {
            line.push_str(", so the wait went on while it worked");
        }
        match (&self.ended, self.looks.last()) {
            (Some(why), Some(last)) if self.looks.len() > 1 => {
                line.push_str(&format!("; the wait ended at {:.0}s: {why}", last.at_seconds))
            }
            (Some(why), _) => line.push_str(&format!("; {why}")),
            (None, _) => {}
        }
        Some(line)
    }
}

impl Patience for BusyPatience<'_> {
    fn extend(&mut self) -> Option<Instant> {
        let Some((then, before)) = self.last.take() else {
            self.ended = Some("no threads to read".into());
            return None;
        };
        let now = Instant::now();
        let Some(sample) = self.threads.sample() else {
            self.ended = Some("the server's threads could not be read".into());
            return None;
        };
        let wall = now.saturating_duration_since(then).as_secs_f64().max(1e-3);
        let Some(busiest) = sample.busiest_since(&before) else {
            self.ended = Some("the server's threads could not be read".into());
            return None;
        };
        let busiest_share = busiest as f64 / 1e9 / wall;
        self.looks.push(Look { at_seconds: now.duration_since(self.sent).as_secs_f64(), busiest_share });
        self.last = Some((now, sample));
        if busiest_share < WORKING_SHARE {
            self.ended = Some("not working on the request".into());
            return None;
        }
        if now >= self.cap {
            self.ended =
                Some("still working when the time for the whole ran out (the suite budget or the stage's)".into());
            return None;
        }
        Some((now + self.step).min(self.cap))
    }
}

#[cfg(test)]
mod tests {
    use super::Budget;

    #[test]
    fn a_budget_takes_back_the_servers_wait_up_to_three_times_itself() {
        let mut b = Budget::new(std::time::Duration::from_secs(10));
        let plain = b.deadline();
        b.give_back(std::time::Duration::from_secs(4), 0.5);
        assert_eq!(b.credit(), std::time::Duration::from_secs(2));
        assert_eq!(b.deadline(), plain + std::time::Duration::from_secs(2));
        b.give_back(std::time::Duration::from_secs(4), f64::NAN);
        b.give_back(std::time::Duration::from_secs(4), -1.0);
        assert_eq!(b.credit(), std::time::Duration::from_secs(2), "nothing given back for a share that is no share");
        b.give_back(std::time::Duration::from_secs(100), 7.0);
        assert_eq!(b.deadline(), b.cap(), "never past three times the budget");
        assert_eq!(b.cap(), plain + std::time::Duration::from_secs(20));
    }

    use super::*;

    /// Without threads to read, the deadline stands, and the description says why.
    #[test]
    fn an_unreadable_server_gets_its_timeout_and_the_reason() {
        let mut p =
            BusyPatience::new(Threads::Unreadable, Duration::from_secs(120), Instant::now() + Duration::from_secs(600));
        assert_eq!(p.describe(), None, "nothing to say before a deadline passed");
        assert_eq!(p.extend(), None);
        let line = p.describe().unwrap();
        assert!(line.contains("threads cannot be read from here") && line.contains("2m request timeout"), "{line}");
    }

    /// An attached server on this machine is read through its listener's process tree: here, this test's own
    /// process spinning a thread is working, and a process that sleeps is idle.
    #[test]
    fn a_local_attached_servers_tree_is_read() {
        let me = [std::process::id() as i32];
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        };
        let cap = Instant::now() + Duration::from_secs(60);
        let mut p = BusyPatience::new(Threads::Attached(&me), Duration::from_millis(300), cap);
        std::thread::sleep(Duration::from_millis(300));
        let extended = p.extend();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.join().unwrap();
        assert!(extended.is_some(), "{:?}", p.looks());
        assert!(p.looks()[0].busiest_share >= WORKING_SHARE, "{:?}", p.looks());

        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tree = [sleeper.id() as i32];
        let mut p = BusyPatience::new(Threads::Attached(&tree), Duration::from_millis(300), cap);
        std::thread::sleep(Duration::from_millis(300));
        let extended = p.extend();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert_eq!(extended, None, "{:?}", p.looks());
        assert!(p.describe().unwrap().contains("was idle"), "{:?}", p.describe());
    }
}
