//! The serde types of every file gauntlet writes or reads, and the pure functions of them that several engine layers
//! share ([`diff`]: which identity fields differ, where two texts first differ), and nothing else.
//!
//! A file carries its version (`schema_version`, `bench_version`, …). Readers accept every version they list and
//! refuse a newer one with a clear message instead of guessing; older versions convert to today's types in one
//! place, [`upgrade`]. Fields added later are `#[serde(default)]` so that older records still read. This crate
//! must never do I/O beyond parsing the text it is given, nor compute digests.

pub mod bench;
pub mod determinism;
pub mod diff;
pub mod field;
pub mod finding;
pub mod identity;
pub mod lossless;
pub mod metric;
pub mod paired;
pub mod problem;
pub mod qualify;
pub mod run;
pub mod server_metrics;
pub mod stats;
pub mod store;
pub mod tokens;
pub mod upgrade;
pub mod words;

pub use finding::{Finding, FindingKind, Severity};
pub use identity::{BuildIdentity, Identity, IdentityRecord, ServerMode};
pub use metric::Metric;
pub use problem::{Problem, ProblemCode};
pub use run::*;
pub use server_metrics::ServerMetrics;
pub use tokens::{AnswerTokens, TokenDivergence, TokenSource};
pub use upgrade::{parse_bench_record, parse_run_record};
pub use words::{KernelLogState, ReceiveClock, SkipKind, StopOutcome};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_fold_to_the_worst() {
        let worst = [Verdict::Pass, Verdict::Warn, Verdict::Fail, Verdict::Warn].into_iter().max();
        assert_eq!(worst, Some(Verdict::Fail));
        assert!(Verdict::Warn > Verdict::Pass);
    }

    #[test]
    fn newer_schema_is_refused_with_a_reason() {
        let err = parse_run_record(r#"{"schema_version": 99}"#).unwrap_err();
        assert!(err.contains("schema_version 99"), "{err}");
        let err = parse_run_record(r#"{"verdict": "pass"}"#).unwrap_err();
        assert!(err.contains("no schema_version"), "{err}");
    }
}
