//! Supervise one server process group: spawn, stop, logs, leftovers, and Ctrl-C forwarding.

mod cgroup;
mod group;
mod port_owner;
pub mod probe;
mod process;
pub mod sched;
mod signals;

pub use cgroup::{CgroupError, HierarchyError, availability as cgroup_availability};
pub use group::{ExpectedChild, group_members, process_tree, spawn_expected};
pub use port_owner::{PortOwnerError, server_pids};
pub use process::{
    Leftover, Leftovers, PortTaken, ServerProcess, SpawnError, StopOutcome, check_port_free, describe_exit, log_tail,
    server_environment,
};
pub use signals::install as install_signal_forwarding;
pub use signals::{finish_on_interrupt, interrupted, unless_interrupted};
