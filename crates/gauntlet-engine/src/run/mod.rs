//! The gate's lifecycle and its outputs.

mod bench;
mod gate;
mod outputs;

pub use bench::{BenchRecord, Workload, read_bench, run_bench};
pub use gate::{GateError, GateOptions, Reporter, RunEvent, Silent, decode_summary, run_gate};
pub use outputs::{write_baseline, write_outputs};
