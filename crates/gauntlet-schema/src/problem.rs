//! A problem a bench or a paired bench met: a stable [`ProblemCode`] that scripts and tests match on, and the
//! words a reader sees. The words may change from one version to the next; the codes do not.
//!
//! Records written before codes existed (`bench.json` before version 14, `paired.json` before version 5) hold
//! the words alone: they read as code [`ProblemCode::Other`] with those words.

use serde::{Deserialize, Serialize};

use crate::string_enum;

string_enum! {
    /// What kind of problem it is.
    pub enum ProblemCode {
        /// The server did not load (spawn, readiness or its first generation failed).
        NotLoaded => "not-loaded",
        /// A spawned server exited while it was measured.
        ServerDied => "server-died",
        /// A signal stopped the measuring early (what was measured is kept).
        Interrupted => "interrupted",
        /// The server did not stop as asked (killed after the grace period, stuck, leftover processes).
        ServerStop => "server-stop",
        /// A finding of severity `fail` (a device fault, a stuck server, a failed build): it fails the bench.
        FailFinding => "fail-finding",
        /// Requests failed (the text says how many, at which concurrency or pair).
        RequestFailed => "request-failed",
        /// A closed loop never had its whole batch in flight at once.
        ConcurrencyShort => "concurrency-short",
        /// A level's metrics could not be computed from some of its requests.
        Measurement => "measurement",
        /// The field workload's input (a trace or conversations) was not read.
        FieldInput => "field-input",
        /// The baseline ran another workload: not compared.
        BaselineWorkload => "baseline-workload",
        /// The baseline has no level of this concurrency.
        BaselineLevel => "baseline-level",
        /// A metric both sides measured could not be compared.
        NotCompared => "not-compared",
        /// A qualification could not keep a file in its bundle.
        BundleWrite => "bundle-write",
        /// A qualification stage failed on the bench verdict alone.
        Verdict => "verdict",
        /// Written before codes existed: the words alone.
        Other => "other",
    }
}

/// One problem: its code and its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Written")]
pub struct Problem {
    pub code: ProblemCode,
    pub text: String,
}

impl Problem {
    pub fn new(code: ProblemCode, text: impl Into<String>) -> Problem {
        Problem { code, text: text.into() }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a problem is written: `{code, text}` since codes exist, the words alone before.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Coded { code: ProblemCode, text: String },
    Words(String),
}

impl From<Written> for Problem {
    fn from(w: Written) -> Problem {
        match w {
            Written::Coded { code, text } => Problem { code, text },
            Written::Words(text) => Problem { code: ProblemCode::Other, text },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_written_with_its_code_and_read_back() {
        let p = Problem::new(ProblemCode::RequestFailed, "concurrency 1: 1 request(s) failed");
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(text, r#"{"code":"request-failed","text":"concurrency 1: 1 request(s) failed"}"#);
        assert_eq!(serde_json::from_str::<Problem>(&text).unwrap(), p);
    }

    #[test]
    fn words_without_a_code_read_as_other() {
        let p: Problem = serde_json::from_str(r#""server stop: killed""#).unwrap();
        assert_eq!(p, Problem::new(ProblemCode::Other, "server stop: killed"));
    }

    #[test]
    fn an_unknown_code_or_a_missing_text_is_refused() {
        assert!(serde_json::from_str::<Problem>(r#"{"code":"made-up","text":"x"}"#).is_err());
        assert!(serde_json::from_str::<Problem>(r#"{"code":"other"}"#).is_err());
        assert!(serde_json::from_str::<Problem>("3").is_err());
    }

    #[test]
    fn every_code_has_its_own_spelling() {
        let mut seen = std::collections::BTreeSet::new();
        for c in ProblemCode::ALL {
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert_eq!(c.as_str().parse::<ProblemCode>().unwrap(), *c);
        }
    }
}
