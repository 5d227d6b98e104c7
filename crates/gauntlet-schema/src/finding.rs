//! Findings: one typed observation of a run, bench or qualification, and its severity.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warn,
    Fail,
}

/// One typed observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
}

/// What a finding is about: a stable machine name. The JSON spellings are those gauntlet has always written.
/// A kind this gauntlet does not know (written by a newer one) reads as [`FindingKind::Other`] and writes back
/// unchanged, so a record is never refused for a finding it cannot name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// The server died during the run.
    Crash,
    /// The server never answered a real generation within the load timeout.
    NeverLoaded,
    /// A request failed: transport error, timeout, malformed answer.
    RequestError,
    /// The suite ran past its budget.
    OverBudget,
    /// A request timed out and the server then answered neither its health path nor a tiny generation.
    Hang,
    /// The server ignored SIGTERM and was killed.
    Killed,
    /// The server survived SIGKILL.
    Stuck,
    /// Processes of the server's group outlived it.
    LeftoverProcess,
    /// The server was already running: its load and stop are not measured.
    Attached,
    /// Passed on the baseline, fails now.
    Regression,
    /// The answer's text differs from the baseline's.
    TextDrift,
    /// The answer turned at a near-tie token and its checks still pass: floating-point noise, not behaviour.
    NumericalDrift,
    /// A repeated case answered differently from its source.
    RepeatDiffers,
    /// Nothing to compare with.
    NoBaseline,
    /// Fewer cases passed than the profile's minimum.
    PassRate,
    /// Fails as on the baseline: the same checks fail (a note).
    KnownFailure,
    /// Failed on the baseline and fails in a new way: a check that passed there fails now.
    FailureChanged,
    /// Fails as the profile declares and as on the baseline.
    ExpectedFailure,
    /// The baseline has another identity.
    IdentityDiffers,
    /// The runtime (driver, VBIOS, CPU details) differs from the baseline's.
    RuntimeDiffers,
    /// The server binary differs from the baseline's: what a gate tests.
    ServerBuildDiffers,
    /// What an attached server says about itself (engine, version, build, models) differs from the baseline's.
    ServerChanged,
    /// Decode is slower than the baseline's beyond the warning ratio.
    SlowDecode,
    /// Load is slower than the baseline's beyond the warning ratio.
    SlowLoad,
    /// A speed below the warning line that the run's own spread does not establish (a note).
    SpeedUnsettled,
    /// Decode speed was not judged: the server's threads waited too long for CPUs that other processes held for
    /// the server's own CPU clock to correct the rate (a note naming the contention).
    SpeedNotJudged,
    /// The draft model's acceptance rate fell below the warning ratio of the baseline's (speculative decoding).
    DraftAcceptanceDropped,
    /// The draft model (speculative decoding) differs from the baseline's: its file, size or digest. Its settings
    /// are identity; its bytes are what a change under test may swap, so it is named here, never silent.
    DraftChanged,
    /// Losslessness with a control: the draft's greedy tokens equal those without it (or differ only by a
    /// near-tie flip whose checks pass). A note.
    Lossless,
    /// The draft's greedy tokens differ from those without it where the control (the server without the draft,
    /// answering again) reproduced them: the draft is not lossless.
    LosslessDiffers,
    /// The draft's tokens differ and so does the control: the server differs from itself, so the draft can be
    /// neither blamed nor cleared.
    LosslessCannotTell,
    /// Decode speeds were not comparable (token sources differ).
    DecodeNotCompared,
    /// The server held no memory on the GPU it is bound to.
    ServerNotOnGpu,
    /// Whether the server computed on the GPU could not be told.
    GpuUseUnknown,
    /// The kernel log could not be read.
    KernelLogBlind,
    /// Kernel-log records were lost or the reader failed.
    KernelLogIncomplete,
    /// The machine rebooted during the run.
    HostRebooted,
    /// Fault lines were already in the kernel log before the run.
    KernelPreRun,
    /// A GPU fault line in the kernel log.
    KernelFault,
    /// A GPU runtime's fault line on the server's stderr.
    RuntimeFault,
    /// A number the server sent (a `/metrics` value, or its change) is not finite: kept as a marker, left out.
    NonFiniteValue,
    /// The server's build step failed (a spawned server built from source).
    BuildFailed,
    /// Any other name, kept verbatim.
    Other(String),
}

impl FindingKind {
    /// Every named kind.
    pub const ALL: &'static [FindingKind] = &[
        FindingKind::Crash,
        FindingKind::BuildFailed,
        FindingKind::NeverLoaded,
        FindingKind::RequestError,
        FindingKind::OverBudget,
        FindingKind::Hang,
        FindingKind::Killed,
        FindingKind::Stuck,
        FindingKind::LeftoverProcess,
        FindingKind::Attached,
        FindingKind::Regression,
        FindingKind::TextDrift,
        FindingKind::NumericalDrift,
        FindingKind::RepeatDiffers,
        FindingKind::NoBaseline,
        FindingKind::PassRate,
        FindingKind::KnownFailure,
        FindingKind::FailureChanged,
        FindingKind::ExpectedFailure,
        FindingKind::IdentityDiffers,
        FindingKind::RuntimeDiffers,
        FindingKind::ServerBuildDiffers,
        FindingKind::ServerChanged,
        FindingKind::SlowDecode,
        FindingKind::SlowLoad,
        FindingKind::SpeedUnsettled,
        FindingKind::SpeedNotJudged,
        FindingKind::DraftAcceptanceDropped,
        FindingKind::DraftChanged,
        FindingKind::Lossless,
        FindingKind::LosslessDiffers,
        FindingKind::LosslessCannotTell,
        FindingKind::DecodeNotCompared,
        FindingKind::ServerNotOnGpu,
        FindingKind::GpuUseUnknown,
        FindingKind::KernelLogBlind,
        FindingKind::KernelLogIncomplete,
        FindingKind::HostRebooted,
        FindingKind::KernelPreRun,
        FindingKind::KernelFault,
        FindingKind::RuntimeFault,
        FindingKind::NonFiniteValue,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            FindingKind::Crash => "crash",
            FindingKind::BuildFailed => "build-failed",
            FindingKind::NeverLoaded => "never-loaded",
            FindingKind::RequestError => "request-error",
            FindingKind::OverBudget => "over-budget",
            FindingKind::Hang => "hang",
            FindingKind::Killed => "killed",
            FindingKind::Stuck => "stuck",
            FindingKind::LeftoverProcess => "leftover-process",
            FindingKind::Attached => "attached",
            FindingKind::Regression => "regression",
            FindingKind::TextDrift => "text-drift",
            FindingKind::NumericalDrift => "numerical-drift",
            FindingKind::RepeatDiffers => "repeat-differs",
            FindingKind::NoBaseline => "no-baseline",
            FindingKind::PassRate => "pass-rate",
            FindingKind::KnownFailure => "known-failure",
            FindingKind::FailureChanged => "failure-changed",
            FindingKind::ExpectedFailure => "expected-failure",
            FindingKind::IdentityDiffers => "identity-differs",
            FindingKind::RuntimeDiffers => "runtime-differs",
            FindingKind::ServerBuildDiffers => "server-build-differs",
            FindingKind::ServerChanged => "server-changed",
            FindingKind::SlowDecode => "slow-decode",
            FindingKind::DraftAcceptanceDropped => "draft-acceptance-dropped",
            FindingKind::DraftChanged => "draft-changed",
            FindingKind::Lossless => "lossless",
            FindingKind::LosslessDiffers => "lossless-differs",
            FindingKind::LosslessCannotTell => "lossless-cannot-tell",
            FindingKind::SlowLoad => "slow-load",
            FindingKind::SpeedUnsettled => "speed-unsettled",
            FindingKind::SpeedNotJudged => "speed-not-judged",
            FindingKind::DecodeNotCompared => "decode-not-compared",
            FindingKind::ServerNotOnGpu => "server-not-on-gpu",
            FindingKind::GpuUseUnknown => "gpu-use-unknown",
            FindingKind::KernelLogBlind => "kernel-log-blind",
            FindingKind::KernelLogIncomplete => "kernel-log-incomplete",
            FindingKind::HostRebooted => "host-rebooted",
            FindingKind::KernelPreRun => "kernel-pre-run",
            FindingKind::KernelFault => "kernel-fault",
            FindingKind::RuntimeFault => "runtime-fault",
            FindingKind::NonFiniteValue => "non-finite-value",
            FindingKind::Other(s) => s,
        }
    }

    pub fn parse(s: &str) -> FindingKind {
        match s {
            "crash" => FindingKind::Crash,
            "build-failed" => FindingKind::BuildFailed,
            "never-loaded" => FindingKind::NeverLoaded,
            "request-error" => FindingKind::RequestError,
            "over-budget" => FindingKind::OverBudget,
            "hang" => FindingKind::Hang,
            "killed" => FindingKind::Killed,
            "stuck" => FindingKind::Stuck,
            "leftover-process" => FindingKind::LeftoverProcess,
            "attached" => FindingKind::Attached,
            "regression" => FindingKind::Regression,
            "text-drift" => FindingKind::TextDrift,
            "numerical-drift" => FindingKind::NumericalDrift,
            "repeat-differs" => FindingKind::RepeatDiffers,
            "no-baseline" => FindingKind::NoBaseline,
            "pass-rate" => FindingKind::PassRate,
            "known-failure" => FindingKind::KnownFailure,
            "failure-changed" => FindingKind::FailureChanged,
            "expected-failure" => FindingKind::ExpectedFailure,
            "identity-differs" => FindingKind::IdentityDiffers,
            "runtime-differs" => FindingKind::RuntimeDiffers,
            "server-build-differs" => FindingKind::ServerBuildDiffers,
            "server-changed" => FindingKind::ServerChanged,
            "slow-decode" => FindingKind::SlowDecode,
            "draft-acceptance-dropped" => FindingKind::DraftAcceptanceDropped,
            "draft-changed" => FindingKind::DraftChanged,
            "lossless" => FindingKind::Lossless,
            "lossless-differs" => FindingKind::LosslessDiffers,
            "lossless-cannot-tell" => FindingKind::LosslessCannotTell,
            "slow-load" => FindingKind::SlowLoad,
            "speed-unsettled" => FindingKind::SpeedUnsettled,
            "speed-not-judged" => FindingKind::SpeedNotJudged,
            "decode-not-compared" => FindingKind::DecodeNotCompared,
            "server-not-on-gpu" => FindingKind::ServerNotOnGpu,
            "gpu-use-unknown" => FindingKind::GpuUseUnknown,
            "kernel-log-blind" => FindingKind::KernelLogBlind,
            "kernel-log-incomplete" => FindingKind::KernelLogIncomplete,
            "host-rebooted" => FindingKind::HostRebooted,
            "kernel-pre-run" => FindingKind::KernelPreRun,
            "kernel-fault" => FindingKind::KernelFault,
            "runtime-fault" => FindingKind::RuntimeFault,
            "non-finite-value" => FindingKind::NonFiniteValue,
            other => FindingKind::Other(other.to_owned()),
        }
    }
}

impl From<&str> for FindingKind {
    fn from(s: &str) -> Self {
        FindingKind::parse(s)
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Comparison with a record's spelling, for tests that read records as text; code compares kinds.
impl PartialEq<&str> for FindingKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for FindingKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FindingKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| FindingKind::parse(&s))
    }
}
