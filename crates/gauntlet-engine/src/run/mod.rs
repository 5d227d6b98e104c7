//! The gate's lifecycle and its outputs.

mod bench;
pub mod bench_html;
pub mod bench_report;
mod bench_spill;
mod field;
mod gate;
pub mod lossless;
mod outputs;

// The bench record's types live in the schema crate; re-exported here so that callers keep their paths.
pub use bench::{
    BENCH_VERSION, Batch, BenchRecord, BenchVerdict, Confirmation, Corpus, Level, MetricComparison, RequestRecord,
    Spreads, Workload, assess, between_session_spreads, confirm, read_bench, read_corpus, recorded_spreads, run_bench,
    write_bench,
};
pub(crate) use bench::{Ways, level, measure, run_batch, to_timeline};
pub mod paired;
pub use gate::{GateError, GateOptions, Reporter, RunEvent, Silent, decode_summary, run_gate};
pub(crate) use gate::{answer_case, case_request, new_case_record, repeat_source};
pub use outputs::{HISTORY_SHOWN, history_points, redacted, store_history, write_baseline, write_outputs};
