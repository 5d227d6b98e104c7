//! The one exit-code map: every command ends in an [`Exit`] (an outcome, or the kind of a [`Failure`]) and
//! [`Exit::code`] alone turns it into the process's status. The book's exit-code table (`docs/src/exit-codes.md`)
//! is tested against [`Exit::ALL`], so the two cannot drift. Nothing here decides an outcome; it only names and numbers it.

use crate::terminal::errln;
use gauntlet_schema::Verdict;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Pass or warn; also every command that did what it was asked.
    Pass,
    /// The thing under test failed (or could not be judged safely: fail closed).
    Fail,
    /// The input is wrong (manifest, flags, files, a refused request): nothing was started.
    BadInput,
    /// The run could not be carried out on this machine (GPU busy, build past its cap, outputs not writable):
    /// skipped, not failed.
    Infrastructure,
    /// Measured, but no verdict can be drawn.
    Inconclusive,
    /// A bug in gauntlet.
    Internal,
}

impl Exit {
    #[cfg(test)]
    pub(crate) const ALL: [Exit; 6] =
        [Exit::Pass, Exit::Fail, Exit::BadInput, Exit::Infrastructure, Exit::Inconclusive, Exit::Internal];

    /// The process exit status.
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Pass => 0,
            Exit::Fail => 1,
            Exit::BadInput => 2,
            Exit::Infrastructure => 3,
            Exit::Inconclusive => 4,
            Exit::Internal => 101,
        }
    }

    /// The word the book's table starts the code's meaning with (the test holds the two together).
    #[cfg(test)]
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Exit::Pass => "pass",
            Exit::Fail => "fail",
            Exit::BadInput => "bad input",
            Exit::Infrastructure => "infrastructure",
            Exit::Inconclusive => "inconclusive",
            Exit::Internal => "internal error",
        }
    }

    /// What a failure of this kind is called on stderr.
    fn prefix(self) -> &'static str {
        match self {
            Exit::Pass => "gauntlet",
            Exit::Fail => "gauntlet: failed closed",
            Exit::BadInput => "gauntlet: error",
            Exit::Infrastructure => "gauntlet: skipped",
            Exit::Inconclusive => "gauntlet: inconclusive",
            Exit::Internal => "gauntlet: internal error",
        }
    }
}

impl From<Verdict> for Exit {
    fn from(v: Verdict) -> Exit {
        match v {
            Verdict::Pass | Verdict::Warn => Exit::Pass,
            Verdict::Fail => Exit::Fail,
            Verdict::Skip => Exit::Infrastructure,
            Verdict::Inconclusive => Exit::Inconclusive,
        }
    }
}

/// A command that could not finish: its kind (which decides the exit code) and what to tell the user.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn bad_input(message: impl Into<String>) -> Failure {
        Failure { exit: Exit::BadInput, message: message.into() }
    }

    pub(crate) fn infrastructure(message: impl Into<String>) -> Failure {
        Failure { exit: Exit::Infrastructure, message: message.into() }
    }

    /// Whether it is safe to measure cannot be told: fail rather than measure wrongly.
    pub(crate) fn fail_closed(message: impl Into<String>) -> Failure {
        Failure { exit: Exit::Fail, message: message.into() }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Failure {
        Failure { exit: Exit::Internal, message: message.into() }
    }

    /// Said on stderr, once, by `main`.
    pub(crate) fn report(&self) {
        errln!("{}: {}", self.exit.prefix(), self.message);
    }
}

/// A command's result, outcome or failure, as the exit status. A command that an interrupt asked to finish (a
/// bench writes what it measured first) exits as one the signal stopped: 128 + the signal, 130 for Ctrl-C.
pub(crate) fn code(result: &Result<Exit, Failure>) -> u8 {
    if let Some(sig) = gauntlet_engine::server::interrupted() {
        return u8::try_from(128 + sig).unwrap_or(130);
    }
    match result {
        Ok(exit) => exit.code(),
        Err(f) => f.exit.code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's exit-code chapter's table (the first table of `docs/src/exit-codes.md`): (code, meaning) per row.
    fn book_table() -> Vec<(u8, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/exit-codes.md");
        let chapter = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let table = chapter.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|'));
        let rows: Vec<(u8, String)> = table
            .filter_map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                Some((cells.first()?.parse().ok()?, cells.get(1)?.to_string()))
            })
            .collect();
        assert!(!rows.is_empty(), "no table rows in the book's exit-code chapter");
        rows
    }

    #[test]
    fn the_book_table_and_the_map_agree() {
        let rows = book_table();
        for (code, meaning) in &rows {
            let exit = Exit::ALL.iter().find(|e| e.code() == *code);
            let exit = exit.unwrap_or_else(|| panic!("the book documents exit code {code}, which gauntlet never uses"));
            assert!(
                meaning.starts_with(exit.meaning()),
                "the book: code {code} means `{meaning}`; the map calls it `{}`",
                exit.meaning()
            );
        }
        for exit in Exit::ALL {
            let n = rows.iter().filter(|(c, _)| *c == exit.code()).count();
            assert_eq!(n, 1, "code {} ({}) is in the book's table {n} times", exit.code(), exit.meaning());
        }
    }

    #[test]
    fn codes_are_distinct_and_verdicts_map_onto_them() {
        let mut codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Exit::ALL.len());
        assert_eq!(Exit::from(Verdict::Warn).code(), 0);
        assert_eq!(Exit::from(Verdict::Skip).code(), 3);
        assert_eq!(code(&Err(Failure::fail_closed("cannot tell whether nvidia:0 is free"))), 1);
    }
}
