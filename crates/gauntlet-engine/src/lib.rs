//! gauntlet's engine: one module per stage of a run. The binary only parses arguments, maps errors to exit codes
//! and draws the terminal; everything it shows is derived from the run record this library produces.

pub mod bench;
pub mod build;
pub mod client;
pub mod compare;
pub mod doctor;
pub mod identity;
pub mod manifest;
pub mod plan;
pub mod qualify;
pub mod report;
pub mod run;
pub mod sentry;
pub mod server;
pub mod session;
pub mod store;
pub mod suite;
pub mod util;
pub mod verdict;

/// gauntlet's home: `$GAUNTLET_HOME`, else `$XDG_CACHE_HOME/gauntlet`, else `~/.cache/gauntlet`.
pub fn home_dir() -> std::path::PathBuf {
    if let Some(h) = std::env::var_os("GAUNTLET_HOME").filter(|h| !h.is_empty()) {
        return h.into();
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|h| !h.is_empty()) {
        return std::path::PathBuf::from(x).join("gauntlet");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    std::path::PathBuf::from(home).join(".cache").join("gauntlet")
}
