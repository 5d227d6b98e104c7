//! gauntlet's whole-binary tests, in one test binary (one link of the engine instead of one per file): each module
//! is a topic. The real-server tests (`real_server::`) measure speed: run them on their own, one at a time
//! (`scripts/test.sh` selects them with `-E 'test(/^real_server::/)' --test-threads 1`).

mod book;
mod ci;
mod client_fidelity;
mod common;
mod exit_codes;
mod faults;
mod real_server;
mod schema;
mod session;
