//! Supervise one server process group: spawn, stop, logs, leftovers, and Ctrl-C forwarding.

mod group;
mod process;
mod signals;

pub use group::group_members;
pub use process::{Leftovers, ServerProcess, SpawnError, StopOutcome, check_port_free, describe_exit, log_tail};
pub use signals::install as install_signal_forwarding;
pub use signals::{finish_on_interrupt, interrupted, unless_interrupted};
