//! Baselines, hash-chained history, trust and the skip-cache. All writes are atomic.

pub mod skip_cache;
#[allow(clippy::module_inception)]
mod store;
mod trust;

pub use store::{
    DECISION_VERSION, Decision, DecisionStage, HistoryEntry, KIND_QUALIFICATION, Provenance, STORE_FORMAT, Store,
    StoreError, entry_digest,
};
pub use trust::{Trust, decide as decide_trust};

/// The store in force: `--store`, else `$GAUNTLET_STORE`, else the manifest's `store`, else `HOME/store`.
pub fn default_store_dir(flag: Option<&std::path::Path>, manifest: Option<&std::path::Path>) -> std::path::PathBuf {
    if let Some(f) = flag {
        return f.to_owned();
    }
    if let Some(env) = std::env::var_os("GAUNTLET_STORE").filter(|s| !s.is_empty()) {
        return env.into();
    }
    if let Some(m) = manifest {
        return m.to_owned();
    }
    crate::util::home_dir().join("store")
}
