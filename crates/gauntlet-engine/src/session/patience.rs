//! Busy, not hung. A request timeout is a guess at how long an answer takes; on a slow or crowded machine a long
//! prompt can outlast it while the server computes the whole time (vLLM on 2 CPU cores prefilling `needle`'s 4000
//! tokens past 120 s, 2026-12-06). When a spawned server's request passes its deadline, [`BusyPatience`] reads
//! what the server's threads did since it last looked (the kernel's schedstat, [`crate::server::sched`]): a thread
//! that kept running or waiting for a CPU is a server at work, so the wait goes on a step at a time; threads asleep
//! are a server that is not working on the request, and the timeout stands. Bounded whatever the server does: never past
//! the caller's cap, the limit the user gave the whole (the gate's suite budget, a qualification stage's time).
//!
//! An attached server's threads cannot be read: its request timeout is the deadline, and the description says why.

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
    process: Option<&'a ServerProcess>,
    sent: Instant,
    timeout: Duration,
    step: Duration,
    cap: Instant,
    last: Option<(Instant, Sample)>,
    looks: Vec<Look>,
    /// Why the last look ended the wait, when it did.
    ended: Option<String>,
}

impl<'a> BusyPatience<'a> {
    /// For a request sent now with `timeout`, to `process` (None: an attached server, no patience), never waiting
    /// past `cap`. While the server works, it looks again every quarter of the timeout (1 to 30 s).
    pub fn new(process: Option<&'a ServerProcess>, timeout: Duration, cap: Instant) -> BusyPatience<'a> {
        let sent = Instant::now();
        let step = (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
        BusyPatience {
            process,
            sent,
            timeout,
            step,
            cap,
            last: process.map(|p| (sent, p.sched_sample())),
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
        if self.process.is_none() {
            return self.ended.as_ref().map(|_| {
                format!("an attached server's threads cannot be read, so its {timeout} request timeout is the deadline")
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
        let process = self.process;
        let Some((p, (then, before))) = process.zip(self.last.take()) else {
            self.ended = Some("no threads to read".into());
            return None;
        };
        let now = Instant::now();
        let sample = p.sched_sample();
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

    /// Without a process there is nothing to read: the deadline stands, and the description says why.
    #[test]
    fn an_attached_server_gets_its_timeout_and_the_reason() {
        let mut p = BusyPatience::new(None, Duration::from_secs(120), Instant::now() + Duration::from_secs(600));
        assert_eq!(p.describe(), None, "nothing to say before a deadline passed");
        assert_eq!(p.extend(), None);
        let line = p.describe().unwrap();
        assert!(
            line.contains("attached server's threads cannot be read") && line.contains("2m request timeout"),
            "{line}"
        );
    }
}
