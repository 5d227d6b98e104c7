//! The sentry: what the kernel log, the server's stderr and the GPU say around a run (DESIGN §9).

pub mod gpu;
pub mod kmsg;
pub mod patterns;

use gauntlet_schema::{Finding, FindingKind, KernelHit, KernelLogState, SentryRecord, Severity};

use kmsg::Observed;
use patterns::{Class, Match, Patterns};

/// Why the kernel log cannot be read: the run is blind.
#[derive(Debug, thiserror::Error)]
pub enum KernelLogError {
    /// `$GAUNTLET_KMSG_FILE` names a file that cannot be opened.
    #[error("{}: {source}", .path.display())]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `/dev/kmsg` is refused.
    #[error(transparent)]
    Dev(#[from] kmsg::DevKmsgError),
}

/// Opens the kernel log and drains what it already holds: `/dev/kmsg`, or the file `$GAUNTLET_KMSG_FILE` names
/// (tests). `Err` says why the run is blind.
pub fn open_kernel_log() -> Result<kmsg::Bracket, KernelLogError> {
    open_kernel_log_from(std::env::var_os("GAUNTLET_KMSG_FILE").filter(|v| !v.is_empty()).map(Into::into))
}

/// [`open_kernel_log`], with the stand-in file (if any) given.
fn open_kernel_log_from(file: Option<std::path::PathBuf>) -> Result<kmsg::Bracket, KernelLogError> {
    let source: Box<dyn kmsg::Source> = match file {
        Some(path) => match kmsg::FileSource::open(&path) {
            Ok(file) => Box::new(file),
            Err(source) => return Err(KernelLogError::File { path, source }),
        },
        None => Box::new(kmsg::DevKmsg::open()?),
    };
    Ok(kmsg::Bracket::start(source, std::path::Path::new("/proc/sys/kernel/random/boot_id")))
}

/// What identifies our server in a kernel line.
#[derive(Debug, Clone, Default)]
pub struct Ours {
    pub pids: Vec<u32>,
    /// Process names as the kernel prints them (comm: at most 15 bytes).
    pub names: Vec<String>,
    /// PCI address of the bound device, normalised (`0000:01:00.0`), when known.
    pub bdf: Option<String>,
    /// The profile runs on a GPU: being blind is then worth a warning.
    pub on_gpu: bool,
}

impl Ours {
    fn owns(&self, m: &Match) -> bool {
        m.pid.is_some_and(|p| self.pids.contains(&p))
            || m.process
                .as_ref()
                .is_some_and(|n| self.names.iter().any(|o| o == n || (n.len() >= 15 && o.starts_with(n.as_str()))))
    }

    fn other_device(&self, m: &Match) -> bool {
        matches!((&self.bdf, &m.bdf), (Some(a), Some(b)) if a != b)
    }
}

fn worst(matches: &[Match]) -> Option<&Match> {
    matches.iter().filter(|m| m.class >= Class::Warn).max_by_key(|m| m.class)
}

fn hit(source: &str, seq: Option<u64>, m: &Match, text: &str, ours: bool) -> KernelHit {
    KernelHit {
        source: source.into(),
        seq,
        pattern: m.pattern.clone(),
        class: m.class.as_str().into(),
        text: text.chars().take(400).collect(),
        device: m.bdf.clone(),
        pid: m.pid,
        process: m.process.clone(),
        ours,
    }
}

/// Turns a bracket (or the reason there is none) and the server's stderr into the run's sentry record and findings.
pub fn assess(observed: Result<&Observed, &str>, stderr: &str, ours: &Ours) -> (SentryRecord, Vec<Finding>) {
    let patterns = Patterns::embedded();
    let mut findings = Vec::new();
    let mut finding = |kind: FindingKind, severity: Severity, message: String| {
        findings.push(Finding { kind, severity, message, case: None });
    };
    let mut rec = SentryRecord::default();

    // The server's own fault lines (ROCr prints these to stderr, then aborts).
    for line in stderr.lines() {
        if let Some(m) = worst(&patterns.classify(line, true)) {
            rec.hits.push(hit("stderr", None, m, line, true));
        }
    }

    let obs = match observed {
        Err(why) => {
            rec.kernel_log = KernelLogState::Blind;
            rec.reason = Some(why.to_owned());
            let severity = if ours.on_gpu { Severity::Warn } else { Severity::Info };
            finding(
                FindingKind::KernelLogBlind,
                severity,
                format!("kernel log not watched, so GPU faults cannot be ruled out: {why}"),
            );
            None
        }
        Ok(o) => Some(o),
    };
    if let Some(o) = obs {
        rec.first_seq = o.first_seq;
        rec.last_seq = o.last_seq;
        rec.kernel_records = o.during.len() as u64;
        rec.lost_records = o.lost;
        rec.ignored_userspace_records = o.ignored_userspace;
        rec.boot_id = o.boot_id_before.clone();
        rec.pre_run_records = o.before.len() as u64;
        for r in &o.before {
            if let Some(m) = worst(&patterns.classify(&r.text, false)) {
                rec.pre_run.push(hit("kmsg", Some(r.seq), &with_device(m, r), &r.text, false));
            }
        }
        let mut last_fault: Option<usize> = None;
        for r in &o.during {
            let matches = patterns.classify(&r.text, false);
            // "Process information: … pid N" names the process of the fault logged just before it.
            if let Some(who) = matches.iter().find(|m| m.class == Class::Attribution)
                && let Some(i) = last_fault
                && rec.hits[i].pid.is_none()
            {
                rec.hits[i].pid = who.pid;
                rec.hits[i].process = who.process.clone();
                rec.hits[i].ours = ours.owns(who);
                continue;
            }
            if let Some(m) = worst(&matches) {
                let m = with_device(m, r);
                let owned = ours.owns(&m) || (m.class == Class::Device && !ours.other_device(&m));
                rec.hits.push(hit("kmsg", Some(r.seq), &m, &r.text, owned));
                last_fault = Some(rec.hits.len() - 1);
            }
        }
        let lost = o.lost > 0 || o.lost_unknown;
        rec.kernel_log = if o.broken.is_some() || lost { KernelLogState::Incomplete } else { KernelLogState::Clean };
        if let Some(why) = &o.broken {
            rec.reason = Some(why.clone());
            finding(FindingKind::KernelLogIncomplete, Severity::Warn, format!("kernel log reader failed: {why}"));
        } else if lost {
            let n = if o.lost_unknown { "an unknown number of".to_owned() } else { o.lost.to_string() };
            rec.reason = Some(format!("{n} kernel-log records were overwritten before they could be read"));
            finding(
                FindingKind::KernelLogIncomplete,
                Severity::Warn,
                format!("{n} kernel-log records lost during the run: a fault among them cannot be ruled out"),
            );
        }
        if o.boot_id_before != o.boot_id_after {
            rec.reason = Some("boot_id changed: the machine rebooted during the run".into());
            rec.kernel_log = KernelLogState::Incomplete;
            finding(
                FindingKind::HostRebooted,
                Severity::Fail,
                "the machine rebooted during the run (boot_id changed)".into(),
            );
        }
        if !rec.pre_run.is_empty() {
            let device_fault = rec.pre_run.iter().any(|h| h.class == "device");
            let severity = if device_fault && ours.on_gpu { Severity::Warn } else { Severity::Info };
            finding(
                FindingKind::KernelPreRun,
                severity,
                format!(
                    "{} fault line(s) were already in the kernel log before the run (machine state, not this run's), first: {}",
                    rec.pre_run.len(),
                    rec.pre_run[0].text
                ),
            );
        }
    }
    for h in &rec.hits {
        let severity = match h.class.as_str() {
            "device" if h.ours => Severity::Fail,
            "app" if h.ours => Severity::Fail,
            _ => Severity::Warn,
        };
        let whose = match (h.ours, &h.device) {
            (true, _) => "ours".to_owned(),
            (false, Some(d)) => format!("not attributed to our server; device {d}"),
            (false, None) => "not attributed to our server".to_owned(),
        };
        finding(
            if h.source == "stderr" { FindingKind::RuntimeFault } else { FindingKind::KernelFault },
            severity,
            format!("{} {} fault ({whose}): {}", h.pattern, h.class, h.text.replace('\n', " ⏎ ")),
        );
    }
    if rec.kernel_log == KernelLogState::Clean && rec.hits.iter().any(|h| h.source == "kmsg") {
        rec.kernel_log = KernelLogState::Fault;
    }
    (rec, findings)
}

/// A `DEVICE=+pci:…` dictionary line names the device when the text does not.
fn with_device(m: &Match, r: &kmsg::Record) -> Match {
    let mut m = m.clone();
    if m.bdf.is_none() {
        m.bdf = r.pci_device().map(patterns::normalise_bdf);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in file that cannot be opened is `File` with its path; a refused `/dev/kmsg` is its own error,
    /// word for word.
    #[test]
    fn a_blind_kernel_log_is_the_variant_of_why() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("kmsg");
        let e = open_kernel_log_from(Some(absent.clone())).err().unwrap();
        assert!(matches!(&e, KernelLogError::File { path, .. } if *path == absent), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", absent.display())), "{e}");
        let dev = kmsg::DevKmsgError::NotTheDevice { path: "/dev/null".into(), major: 1, minor: 3 };
        let words = dev.to_string();
        let e = KernelLogError::from(dev);
        assert!(matches!(e, KernelLogError::Dev(kmsg::DevKmsgError::NotTheDevice { major: 1, minor: 3, .. })));
        assert_eq!(e.to_string(), words);
    }
}
