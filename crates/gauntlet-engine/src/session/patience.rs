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

impl Threads<'_> {
    fn sample(&self) -> Option<Sample> {
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
