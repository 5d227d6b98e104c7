//! The engine's integration tests, in one test binary (one link of the engine instead of one per file): each module
//! is a topic; `fixtures/` holds their inputs and `snapshots/` their insta snapshots (named `it__<module>__<name>`).

mod bench;
mod file_rule;
mod hostile_files;
mod lm_eval_manifest;
mod lossless;
mod manifest;
mod manifest_contract;
mod qualify;
mod records_total;
mod report;
mod sentry;
mod store;
mod strict_manifest;
mod typed_records;
