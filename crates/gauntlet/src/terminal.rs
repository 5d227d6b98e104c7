//! The live view on stderr (a progress bar on a TTY, plain lines otherwise) and the summary on stdout.

use std::io::Write;
use std::path::Path;

use gauntlet_engine::run::{Reporter, RunEvent};
use gauntlet_schema::{CaseStatus, RunRecord, Severity};

pub struct View {
    tty: bool,
    bar_shown: bool,
}

impl View {
    pub fn new(tty: bool) -> View {
        View { tty, bar_shown: false }
    }

    fn line(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        if self.bar_shown {
            let _ = write!(err, "\r\x1b[2K");
            self.bar_shown = false;
        }
        let _ = writeln!(err, "{text}");
    }

    fn bar(&mut self, done: usize, total: usize, label: &str) {
        let width = 24;
        let filled = (done * width).checked_div(total).unwrap_or(width).min(width);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K[{}{}] {done}/{total} {label}", "#".repeat(filled), "-".repeat(width - filled));
        let _ = err.flush();
        self.bar_shown = true;
    }
}

impl Reporter for View {
    fn event(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Started { profile, cases, base_url } => {
                self.line(&format!("gauntlet: profile `{profile}`, {cases} cases, server {base_url}"));
            }
            RunEvent::Loading => {
                if self.tty {
                    self.bar(0, 1, "loading the model…");
                } else {
                    self.line("gauntlet: waiting for the server to load");
                }
            }
            RunEvent::Loaded { seconds } => match seconds {
                Some(s) => self.line(&format!("gauntlet: server ready in {s:.2} s")),
                None => self.line("gauntlet: attached server is ready"),
            },
            RunEvent::LoadFailed { reason } => self.line(&format!("gauntlet: server did not load: {reason}")),
            RunEvent::CaseFinished { index, total, case } => {
                let status = match case.status {
                    CaseStatus::Pass => "pass",
                    CaseStatus::Fail => "FAIL",
                    CaseStatus::Error => "ERROR",
                    CaseStatus::Skipped => "skipped",
                };
                let secs = case.seconds.map(|s| format!(" ({s:.2} s)")).unwrap_or_default();
                let why = case
                    .skip_reason
                    .clone()
                    .or_else(|| case.error.clone())
                    .or_else(|| {
                        let failed: Vec<String> = case
                            .checks
                            .iter()
                            .filter(|c| !c.passed)
                            .map(|c| format!("{}: {}", c.check, c.detail))
                            .collect();
                        (!failed.is_empty()).then(|| failed.join("; "))
                    })
                    .map(|w| format!(" — {w}"))
                    .unwrap_or_default();
                let text = format!("{:>2}/{total} {:<16} {status}{secs}{why}", index + 1, case.id);
                if self.tty {
                    self.line(&text);
                    self.bar(index + 1, *total, "");
                } else {
                    self.line(&format!("gauntlet: {text}"));
                }
            }
            RunEvent::Stopping => {
                if self.tty {
                    self.line("gauntlet: stopping the server");
                }
            }
            RunEvent::Finished { .. } => {}
            RunEvent::Note(text) => self.line(&format!("gauntlet: {text}")),
        }
    }
}

pub fn summary(out: &mut dyn Write, run: &RunRecord, dir: &Path) -> std::io::Result<()> {
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    writeln!(
        out,
        "gauntlet {}: {} — {} pass, {} fail, {} error, {} skipped",
        run.profile,
        run.verdict.as_str().to_uppercase(),
        count(CaseStatus::Pass),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped)
    )?;
    let mut findings: Vec<_> = run.findings.iter().filter(|f| f.severity != Severity::Info).collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for f in findings {
        let sev = if f.severity == Severity::Fail { "fail" } else { "warn" };
        match &f.case {
            Some(c) => writeln!(out, "  {sev} {} [{c}]: {}", f.kind, f.message)?,
            None => writeln!(out, "  {sev} {}: {}", f.kind, f.message)?,
        }
    }
    writeln!(out, "report: {}", dir.join("report.md").display())
}

/// `gauntlet doctor`: one line per check, its fix indented under it, then the tally.
pub fn doctor(out: &mut dyn Write, exam: &gauntlet_engine::doctor::Examination, origin: &str) -> std::io::Result<()> {
    use gauntlet_engine::doctor::Status;
    writeln!(out, "gauntlet doctor: profile `{}` ({origin}), device {}", exam.profile, exam.device)?;
    for c in &exam.checks {
        let status = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        writeln!(out, "  {status}  {:<13} {}", c.subject, c.detail)?;
        if let Some(fix) = &c.fix {
            writeln!(out, "        {:<13} fix: {fix}", "")?;
        }
    }
    let count = |s: Status| exam.checks.iter().filter(|c| c.status == s).count();
    let verdict = match exam.worst() {
        Status::Fail => "a run would fail",
        Status::Warn => "a run can go ahead, with the warnings above",
        Status::Ok => "ready to run",
    };
    writeln!(out, "{} ok, {} warn, {} fail: {verdict}", count(Status::Ok), count(Status::Warn), count(Status::Fail))
}

/// `gauntlet bench`: one row per concurrency, then each comparison as "baseline → now (change, interval, call)".
pub fn bench(out: &mut dyn Write, r: &gauntlet_engine::run::BenchRecord, dir: &Path) -> std::io::Result<()> {
    let ms = |v: &serde_json::Value| v.as_f64().map(|x| format!("{:.1}", x * 1000.0)).unwrap_or_else(|| "—".into());
    writeln!(
        out,
        "gauntlet bench {}: {} (tokens from {})",
        r.profile,
        r.verdict.as_str().to_uppercase(),
        r.levels.first().and_then(|l| l.metrics["token_source"].as_str()).unwrap_or("?")
    )?;
    writeln!(
        out,
        "{:>4} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "conc", "reqs", "failed", "TTFT p50", "TTFT p99", "TPOT ms", "ITL p99", "out tok/s", "in flight"
    )?;
    for l in &r.levels {
        let m = &l.metrics;
        writeln!(
            out,
            "{:>4} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10.1} {:>9}",
            l.concurrency,
            m["requests"].as_u64().unwrap_or(0),
            m["failed"].as_u64().unwrap_or(0),
            ms(&m["ttft"]["p50"]),
            ms(&m["ttft"]["p99"]),
            ms(&m["tpot"]["mean"]),
            ms(&m["itl_chunk"]["p99"]),
            m["output_throughput_wall"].as_f64().unwrap_or(0.0),
            l.batches.iter().map(|b| b.in_flight_max).max().unwrap_or(0)
        )?;
        for c in &l.comparisons {
            writeln!(out, "     {}", gauntlet_engine::run::bench_report::comparison_line(l.concurrency, c))?;
        }
    }
    for p in &r.problems {
        writeln!(out, "  problem: {p}")?;
    }
    if r.verdict == "candidate" {
        writeln!(out, "  no baseline: these numbers are candidate evidence (pass --baseline an earlier bench.json)")?;
    }
    writeln!(out, "bench: {} (bench.md, bench.bmf.json beside it)", dir.join("bench.json").display())
}

/// The qualification's stage table on stdout.
pub fn qualification(
    out: &mut impl Write,
    q: &gauntlet_engine::qualify::Qualification,
    dir: &std::path::Path,
) -> std::io::Result<()> {
    for s in &q.stages {
        let secs = s.seconds.map_or(String::new(), |x| format!("{x:7.1}s"));
        writeln!(out, "{:3} {:12} {:>8}  {}", s.id, s.status.as_str().to_uppercase(), secs, s.summary)?;
        for f in s.failures.iter().take(5) {
            writeln!(out, "      - {f}")?;
        }
    }
    let partial = if q.partial { " (partial)" } else { "" };
    writeln!(out, "qualification {}{partial}: {}", q.verdict.as_str().to_uppercase(), dir.display())
}
