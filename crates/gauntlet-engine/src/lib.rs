//! gauntlet's engine: one module per stage of a run. The binary only parses arguments, maps errors to exit codes
//! and draws the terminal; everything it shows is derived from the run record this library produces.

pub mod bench;
pub mod build;
pub mod client;
pub mod compare;
pub mod doctor;
pub mod formats;
pub mod identity;
pub mod kinds;
#[cfg(test)]
mod layers;
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
#[cfg(test)]
mod typed_errors;
pub mod util;
pub mod verdict;

// gauntlet's home is a machine fact (`util`); re-exported at the root, where the CLI reads it.
pub use util::home_dir;
