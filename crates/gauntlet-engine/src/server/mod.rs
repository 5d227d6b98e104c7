//! Supervise one server process group: spawn, stop, logs, leftovers, and Ctrl-C forwarding.

mod process;
mod signals;

pub use process::{ServerProcess, SpawnError, StopOutcome, check_port_free, describe_exit, group_members, log_tail};
pub use signals::install as install_signal_forwarding;
