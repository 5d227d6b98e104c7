//! The gate's lifecycle and its outputs; the bench, the paired bench and the measuring room (`room`) they and
//! qualify's R4/R5 send their requests through.

mod bench;
pub mod bench_html;
pub mod bench_report;
mod bench_spill;
mod field;
mod gate;
pub mod lossless;
mod outputs;
mod room;

// The bench record's types live in the schema crate; re-exported here so that callers keep their paths.
pub(crate) use bench::level;
pub use bench::{
    BENCH_VERSION, Batch, BenchReadError, BenchRecord, BenchVerdict, Confirmation, Corpus, Deciding, Level,
    MetricComparison, RequestRecord, Spreads, Workload, assess, between_session_spreads, confirm, read_bench,
    read_corpus, recorded_spreads, run_bench, stored_deciding, write_bench,
};
pub(crate) use room::to_timeline;

/// Every concurrency of `workload` on a ready server, one [`Level`](gauntlet_schema::bench::Level) each: a field
/// workload (a trace replay or conversations) by [`field`], the built-in one by [`bench`] in the measuring room
/// ([`room`]). Chosen here so that neither of the two measuring modules depends on the other.
pub(crate) async fn measure(
    client: &crate::client::Client,
    profile: &crate::manifest::Profile,
    workload: &gauntlet_schema::bench::Workload,
    process: Option<&mut crate::server::ServerProcess>,
    spill: Option<&mut bench_spill::Spill>,
    reporter: &mut dyn Reporter,
) -> (Vec<gauntlet_schema::bench::Level>, Vec<gauntlet_schema::Problem>) {
    match &workload.field {
        Some(field) => {
            let client =
                &client.clone().timing_first().with_max_response_bytes(room::response_limit(workload.max_tokens));
            field::measure(client, profile, workload, field, spill, reporter).await
        }
        None => bench::measure_levels(client, profile, workload, process, spill, reporter).await,
    }
}
pub mod paired;
pub use gate::{GateError, GateOptions, Reporter, RunEvent, Silent, decode_summary, run_gate};
pub(crate) use gate::{answer_case, case_request, new_case_record, repeat_source};
pub use outputs::{
    BaselineWriteError, HISTORY_SHOWN, history_points, redacted, store_history, write_baseline, write_outputs,
};
