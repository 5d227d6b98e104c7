//! The one place where older record versions become today's types. Every reader of a versioned file goes through
//! a function here; none of them guesses at a version it does not know: a newer one is refused naming the version
//! and what this gauntlet reads.

use serde_json::Value;

use crate::bench::{BENCH_VERSION, BenchRecord};
use crate::identity::{BuildIdentity, IdentityRecord};
use crate::run::{RUN_RECORD_READABLE, RunRecord};
use crate::store::{DECISION_VERSION, Decision, STORE_FORMAT, StoreFormat};

/// Reads `run.json` of any readable version as today's [`RunRecord`].
///
/// Versions before 5 kept the server binary's digest in `runtime.server_binary_sha256`; it moves to the
/// identity's `build` (outside the digest, so the record's `identity_digest` stays valid). A version-1 identity
/// has an older shape and stays [`IdentityRecord::Legacy`].
pub fn parse_run_record(text: &str) -> Result<RunRecord, String> {
    let raw: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let version =
        raw.get("schema_version").and_then(Value::as_u64).ok_or("no schema_version: not a gauntlet run record")?;
    if !RUN_RECORD_READABLE.iter().any(|v| u64::from(*v) == version) {
        return Err(format!(
            "run record schema_version {version} is not readable by gauntlet {} (reads {:?}); upgrade gauntlet",
            env!("CARGO_PKG_VERSION"),
            RUN_RECORD_READABLE
        ));
    }
    let mut record: RunRecord = serde_json::from_value(raw).map_err(|e| format!("malformed run record: {e}"))?;
    // Versions 6 to 8 only added fields (`answer.tokens`, `answer.timings`, `usage.cached_tokens`, `server_metrics`)
    // that older records read without.
    if version < 5 {
        move_binary_digest(&mut record.identity, &mut record.runtime);
    }
    Ok(record)
}

/// Before version 5 the server binary's digest was a runtime fact (`runtime.server_binary_sha256`); since then it
/// is the identity's `build`. Used for run records and bench records alike.
pub fn move_binary_digest(identity: &mut IdentityRecord, runtime: &mut Value) {
    let Some(id) = identity.current_mut() else { return };
    let Some(old) = runtime.as_object_mut().and_then(|m| m.remove("server_binary_sha256")) else { return };
    if id.build.is_none() {
        // Older versions wrote `unreadable: <why>` when the binary could not be hashed: no digest.
        let sha = old.as_str().filter(|s| !s.starts_with("unreadable")).map(str::to_owned);
        id.build = Some(BuildIdentity { binary_sha256: sha, source_digest: None, built: false });
    }
}

/// Reads a bench record (`bench.json`, `r5-performance.json`) of any readable version as today's
/// [`BenchRecord`]. Version 2 added `released_monotonic_ns`, 3 `receive_clock` and `connected` (all optional);
/// version 4 typed the identity (`build`, moved from `runtime.server_binary_sha256`); 5 added `text_dropped`
/// (optional), 6 `spill`, 7 `server_metrics` (both optional); 10 a level's `sub_sessions` (optional: a record
/// without them carries no measured spread). `origin` names the file in every error.
pub fn parse_bench_record(text: &str, origin: &str) -> Result<BenchRecord, String> {
    let raw: Value = serde_json::from_str(text).map_err(|e| format!("{origin}: not JSON: {e}"))?;
    let version = match raw.get("bench_version").and_then(Value::as_u64) {
        Some(v) if (1..=u64::from(BENCH_VERSION)).contains(&v) => v,
        Some(v) => {
            return Err(format!("{origin}: bench_version {v} is not readable (reads 1 to {BENCH_VERSION})"));
        }
        None => return Err(format!("{origin}: no bench_version: not a gauntlet bench record")),
    };
    let mut record: BenchRecord = serde_json::from_value(raw).map_err(|e| format!("{origin}: {e}"))?;
    if version < 4 {
        move_binary_digest(&mut record.identity, &mut record.runtime);
    }
    bound_levels(&mut record.levels);
    Ok(record)
}

/// Every level of a bench record read holds at most [`crate::bench::SAMPLES_KEPT`] samples a metric
/// ([`crate::bench::Level::bound_samples`]), whoever wrote it.
fn bound_levels(levels: &mut [crate::bench::Level]) {
    for l in levels {
        l.bound_samples();
        // Sub-sessions are a handful per level; a record that claims more was not written by a bench, and a spread
        // measured from it is no evidence: read as having none.
        if let Some(s) = &l.sub_sessions
            && (s.batches.len() > crate::bench::SUB_SESSIONS_MAX
                || s.means.values().any(|m| m.len() > crate::bench::SUB_SESSIONS_MAX))
        {
            l.sub_sessions = None;
        }
    }
}

/// Reads `format.json` (formats 1 and 2 have the same shape): the store's format, refusing one newer than
/// [`STORE_FORMAT`] ([`StoreFormatError::Newer`]) or a file that is not a format file ([`StoreFormatError::Malformed`]).
pub fn parse_store_format(text: &str) -> Result<u32, StoreFormatError> {
    let f: StoreFormat = serde_json::from_str(text).map_err(|e| StoreFormatError::Malformed(e.to_string()))?;
    if f.format > STORE_FORMAT {
        return Err(StoreFormatError::Newer(f.format));
    }
    Ok(f.format)
}

#[derive(Debug, Clone, PartialEq)]
pub enum StoreFormatError {
    Malformed(String),
    Newer(u32),
}

/// Reads a qualification decision of version 1 or 2 as today's [`Decision`]. Version 1's performance record is a
/// bench record of version 3 or older: its binary digest moves into the identity's `build` like a bench record's.
pub fn parse_decision(text: &str) -> Result<Decision, String> {
    let raw: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let version = raw.get("decision_version").and_then(Value::as_u64);
    match version {
        Some(v) if (1..=u64::from(DECISION_VERSION)).contains(&v) => {}
        other => {
            let found = other.map_or_else(|| raw["decision_version"].to_string(), |v| v.to_string());
            return Err(format!("decision_version {found} is not readable here (reads 1 to {DECISION_VERSION})"));
        }
    }
    let bench_version = raw["performance"]["bench_version"].as_u64().unwrap_or(0);
    let mut d: Decision = serde_json::from_value(raw).map_err(|e| e.to_string())?;
    if bench_version < 4 {
        move_binary_digest(&mut d.performance.identity, &mut d.performance.runtime);
    }
    bound_levels(&mut d.performance.levels);
    Ok(d)
}
