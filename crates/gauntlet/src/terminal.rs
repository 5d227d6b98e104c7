//! The live view on stderr (an indicatif progress bar on a TTY, plain lines otherwise) and the summary on stdout.
//!
//! This file owns both streams: every line gauntlet prints goes through [`clean`] (the `outln!`/`errln!` macros,
//! [`stdout`], [`stderr`]); a test keeps `println!` and friends out of the rest of the binary. Much of what is
//! printed quotes a server or a file someone else wrote, so each line is redacted (secrets), stripped of terminal
//! control characters (shown as `\uXXXX`), and kept from being read as a GitHub workflow command
//! (`::add-mask::`, `::error::`, `##[…]`). The only lines that are workflow commands on purpose go out through [`workflow_commands`].

use std::io::{IsTerminal, Write};
use std::path::Path;

use gauntlet_engine::run::{Reporter, RunEvent};
use gauntlet_schema::{CaseStatus, Metric, RunRecord, Severity};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `println!` through [`clean`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::terminal::say(&mut $crate::terminal::stdout(), &format!($($arg)*)) };
}

/// `eprintln!` through [`clean`].
macro_rules! errln {
    ($($arg:tt)*) => { $crate::terminal::say(&mut $crate::terminal::stderr(), &format!($($arg)*)) };
}

pub(crate) use {errln, outln};

/// One line of text as it may be printed: secrets redacted; control characters (escape sequences, carriage
/// returns, line and paragraph separators, bidirectional overrides) shown escaped instead of acting on the
/// terminal; and a line that GitHub Actions would read as a workflow command defused: it reads `::command::` at
/// the start of a line (after any whitespace) and `##[command]` anywhere in it.
/// The engine's one cleaning rule ([`gauntlet_engine::util::clean::line`]), which the report writers share.
pub(crate) fn clean(line: &str) -> String {
    gauntlet_engine::util::clean::line(line)
}

/// A stream whose every line goes through [`clean`]. Text is held until its line is complete (or the stream is
/// flushed), so a command cannot be assembled from two writes.
pub(crate) struct Clean<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> Clean<W> {
    fn emit(&mut self, line: &[u8], newline: bool) -> std::io::Result<()> {
        let text = clean(&String::from_utf8_lossy(line));
        self.inner.write_all(text.as_bytes())?;
        if newline {
            self.inner.write_all(b"\n")?;
        }
        Ok(())
    }
}

impl<W: Write> Write for Clean<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            self.emit(&line[..i], true)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line, false)?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Clean<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Standard output, cleaned line by line.
pub(crate) fn stdout() -> Clean<std::io::StdoutLock<'static>> {
    Clean { inner: std::io::stdout().lock(), pending: Vec::new() }
}

/// Standard error, cleaned line by line.
pub(crate) fn stderr() -> Clean<std::io::StderrLock<'static>> {
    Clean { inner: std::io::stderr().lock(), pending: Vec::new() }
}

/// Writes CSV to standard output as it is: its writer (`bench_report::csv`) has already replaced every control
/// character in its cells, and its CRLF line ends belong to the format (the line cleaner would escape them).
pub(crate) fn write_csv(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Whether standard error is a terminal (the live view draws a bar there).
pub(crate) fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Writes `text` and a line break (what `outln!`/`errln!` expand to).
pub(crate) fn say(out: &mut impl Write, text: &str) {
    let _ = writeln!(out, "{text}");
}

/// GitHub workflow commands on stdout, as `report::github` rendered them (one per line, their data escaped as
/// GitHub requires): redacted, but not defused, since they are commands on purpose.
pub(crate) fn workflow_commands(text: &str) {
    let mut out = std::io::stdout().lock();
    for line in text.lines() {
        let line = gauntlet_engine::util::redact::text(line);
        // A line that is not one workflow command (no `::` start) is not passed through raw.
        // One whose data still holds a hostile character (a control, a bidi override) is cleaned instead.
        let line = if line.starts_with("::") && !line.chars().any(gauntlet_engine::util::clean::is_hostile) {
            line.into_owned()
        } else {
            clean(&line)
        };
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// The live view of a run: plain lines on stderr; on a terminal, an indicatif bar under them that the lines
/// scroll above. The bar's label passes through [`clean`] like every line: server text never reaches the terminal
/// as an escape sequence, and indicatif draws the bar's own.
pub struct View {
    tty: bool,
    bar: Option<ProgressBar>,
    target: fn() -> ProgressDrawTarget,
}

impl View {
    pub fn new(tty: bool) -> View {
        View { tty, bar: None, target: ProgressDrawTarget::stderr }
    }

    /// A line above the bar (the bar is lifted while it is written, then drawn again).
    fn line(&mut self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| say(&mut stderr(), text)),
            None => say(&mut stderr(), text),
        }
    }

    /// The bar at `done` of `total`, labelled; drawn at once on first use.
    fn bar(&mut self, done: usize, total: usize, label: &str) {
        let target = self.target;
        let bar = self.bar.get_or_insert_with(|| {
            // The template is a constant; were it refused, indicatif's default bar would do.
            let style = ProgressStyle::with_template("[{bar:24}] {pos}/{len} {msg}")
                .map(|s| s.progress_chars("#-"))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::with_draw_target(None, target()).with_style(style)
        });
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(clean(label));
    }

    /// Takes the bar off the terminal, when the phase it showed is over.
    fn hide_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.hide_bar();
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
            RunEvent::Loaded { seconds } => {
                self.hide_bar();
                match seconds {
                    Some(s) => self.line(&format!("gauntlet: server ready in {s:.2} s")),
                    None => self.line("gauntlet: attached server is ready"),
                }
            }
            RunEvent::LoadFailed { reason } => {
                self.hide_bar();
                self.line(&format!("gauntlet: server did not load: {reason}"));
            }
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
                    self.hide_bar();
                    self.line("gauntlet: stopping the server");
                }
            }
            RunEvent::Finished { .. } => self.hide_bar(),
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
    // A changed server first (it explains whatever drift follows), then the worst first.
    let findings: Vec<_> =
        gauntlet_engine::report::ordered(&run.findings).into_iter().filter(|f| f.severity != Severity::Info).collect();
    for f in findings {
        let sev = if f.severity == Severity::Fail { "fail" } else { "warn" };
        match &f.case {
            Some(c) => writeln!(out, "  {sev} {} [{c}]: {}", f.kind, f.message)?,
            None => writeln!(out, "  {sev} {}: {}", f.kind, f.message)?,
        }
    }
    if let Some(j) = gauntlet_engine::report::jitter_line(run) {
        writeln!(out, "  text jitter vs baseline: {j}")?;
    }
    if let Some(d) = gauntlet_engine::report::draft_line(run) {
        writeln!(out, "  draft: {d}")?;
    }
    if let Some(l) = gauntlet_engine::report::lossless_line(run) {
        writeln!(out, "  lossless: {l}")?;
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
        // A terminal row keeps to 80 columns: the metrics a person looks at first, not every one of `bench.md`.
        let shown = |m: Metric| m.show(l.pooled(m));
        writeln!(
            out,
            "{:>4} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10.1} {:>9}",
            l.concurrency,
            l.requests(),
            l.failed(),
            shown(Metric::TtftP50),
            shown(Metric::TtftP99),
            shown(Metric::TpotMean),
            shown(Metric::ItlP99),
            l.pooled(Metric::OutputThroughput).unwrap_or(0.0),
            l.tally_or_fold().in_flight_max
        )?;
        if let Some(g) = gauntlet_engine::run::bench_report::goodput_line(&r.workload, l) {
            writeln!(out, "     {g}")?;
        }
        if let Some(s) = gauntlet_engine::run::bench_report::spread_line(l) {
            writeln!(out, "     {s}")?;
        }
        if let Some(s) = gauntlet_engine::run::bench_report::structured_line(l) {
            writeln!(out, "     {s}")?;
        }
        for c in &l.comparisons {
            writeln!(out, "     {}", gauntlet_engine::run::bench_report::comparison_line(l.concurrency, c))?;
        }
    }
    if let Some(d) = gauntlet_engine::run::bench_report::deciding_line(r) {
        writeln!(out, "  {d}")?;
    }
    for p in &r.problems {
        writeln!(out, "  problem: {p}")?;
    }
    if r.verdict == gauntlet_engine::run::BenchVerdict::Candidate {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_cannot_inject_workflow_commands_or_terminal_controls() {
        assert_eq!(clean("::add-mask::x"), "\\::add-mask::x");
        assert_eq!(clean(" \u{a0}::stop-commands::tok"), "\\ \u{a0}::stop-commands::tok");
        assert_eq!(clean("gauntlet: ok ##[error]boom"), "gauntlet: ok #\u{200b}#[error]boom");
        assert_eq!(clean("a\rb\x1b[31mc\u{202e}d"), "a\\u000db\\u001b[31mc\\u202ed");
        // Inside JSON on stdout (`--json`), the result still parses, to the same text minus the controls.
        let json = serde_json::to_string(&"x\u{2028}##[y]\u{85}").unwrap();
        let back: String = serde_json::from_str(&clean(&json)).unwrap();
        assert_eq!(back, "x\u{2028}#\u{200b}#[y]\u{85}");
        assert_eq!(clean("plain: 1::2\tend"), "plain: 1::2\tend");
        let mut out = Clean { inner: Vec::new(), pending: Vec::new() };
        write!(out, "first line\n::err").unwrap();
        write!(out, "or::x\nlast").unwrap();
        out.flush().unwrap();
        let text = String::from_utf8(std::mem::take(&mut out.inner)).unwrap();
        assert_eq!(text, "first line\n\\::error::x\nlast");
    }

    /// What indicatif wrote to the fake terminal of [`on_the_bar`]: text only (its cursor moves and line clearing
    /// are calls of their own, which a real terminal turns into its escape sequences).
    static DRAWN: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

    #[derive(Debug)]
    struct Recorder;

    impl indicatif::TermLike for Recorder {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            DRAWN.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn on_the_bar() -> ProgressDrawTarget {
        ProgressDrawTarget::term_like(Box::new(Recorder))
    }

    /// On a terminal the bar is indicatif's, and its label goes through [`clean`] like every line: text from a
    /// server (an OSC title sequence, BEL, a bidi override) is drawn escaped, never as the control it is.
    #[test]
    fn the_bar_draws_only_cleaned_text() {
        let mut view = View { tty: true, bar: None, target: on_the_bar };
        view.bar(1, 3, "\u{1b}]0;owned\u{7}case\u{202e}x");
        view.hide_bar();
        let drawn = DRAWN.lock().unwrap().clone();
        assert!(drawn.contains("[########----------------] 1/3 \\u001b]0;owned\\u0007case\\u202ex"), "{drawn:?}");
        assert!(!drawn.chars().any(|c| c.is_control() && c != '\n' || c == '\u{202e}'), "{drawn:?}");
    }

    /// Every line the binary prints goes through this file: no `println!` and friends elsewhere.
    #[test]
    fn no_other_file_writes_to_the_standard_streams() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.clone()];
        let mut offenders = Vec::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
                continue;
            }
            if p.file_name().is_some_and(|n| n == "terminal.rs") || p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                for banned in
                    ["println!(", "print!(", "eprintln!(", "eprint!(", "io::stdout()", "io::stderr()", "dbg!("]
                {
                    let hit = code.contains(banned);
                    if hit {
                        offenders.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "print through crate::terminal (outln!/errln!/stdout()):\n{}",
            offenders.join("\n")
        );
    }
}
