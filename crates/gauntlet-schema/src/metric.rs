//! The metrics of a bench as one type, [`Metric`]: each one's key in the records, its name and unit, which way is
//! better, how it is shown, where its pooled value sits in a level's `metrics`, and whether a bench samples it per
//! batch (and so compares it with a stored baseline) or a paired bench judges it. The bench, the paired bench, the
//! stored comparison and every writer (md, html, csv, bmf) iterate [`Metric::ALL`] (or its slices
//! [`Metric::BENCH`], [`Metric::PAIRED`]) instead of naming metrics by hand, so a metric is added in one place: a
//! variant here, its computation in the engine (an exhaustive match there makes the compiler ask for it).
//!
//! Records keep their string keys (`samples`, `comparisons[].metric`, `paired.json`'s `values`): a record is
//! untrusted input and may carry keys this version does not know, which a reader skips rather than refuses. The
//! keys are [`Metric::key`] and [`Metric::paired_key`]; [`Metric::from_key`] reads one back.

use crate::bench::Better;

/// A metric's unit in the records, and the one it is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds in the records, milliseconds when shown.
    Seconds,
    TokensPerSecond,
    RequestsPerSecond,
    /// A fraction (0 to 1) in the records and when shown.
    Fraction,
}

impl Unit {
    /// From the records' unit to the one a person reads (milliseconds, a percentage).
    pub fn shown_factor(self) -> f64 {
        match self {
            Unit::Seconds => 1e3,
            Unit::Fraction => 100.0,
            Unit::TokensPerSecond | Unit::RequestsPerSecond => 1.0,
        }
    }

    /// From the records' unit to the exported one ([`Unit::slug`]): milliseconds; a fraction stays one.
    pub fn export_factor(self) -> f64 {
        match self {
            Unit::Seconds => 1e3,
            Unit::TokensPerSecond | Unit::RequestsPerSecond | Unit::Fraction => 1.0,
        }
    }

    /// The shown unit as a column heading ends: "ms", "tok/s", "req/s", "%".
    pub fn shown(self) -> &'static str {
        match self {
            Unit::Seconds => "ms",
            Unit::TokensPerSecond => "tok/s",
            Unit::RequestsPerSecond => "req/s",
            Unit::Fraction => "%",
        }
    }

    /// The exported unit as a BMF measure's slug ends: "-ms", "-tok-per-s", "-req-per-s"; empty for a fraction.
    pub fn slug(self) -> &'static str {
        match self {
            Unit::Seconds => "-ms",
            Unit::TokensPerSecond => "-tok-per-s",
            Unit::RequestsPerSecond => "-req-per-s",
            Unit::Fraction => "",
        }
    }
}

/// One metric of a bench (a statistic of a level) or of a paired bench (a request's value judged pair by pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Output tokens per second of wall duration (the batch's release to its last response; vLLM's duration).
    OutputThroughput,
    TtftMean,
    TtftP50,
    TtftP99,
    /// Time per output token after the first: (e2el − ttft) / (n − 1); vLLM's TPOT, AIPerf's ITL.
    TpotMean,
    /// Gaps between token events, pooled over requests (vLLM's ITL, AIPerf's ICL).
    ItlP99,
    E2elMean,
    E2elP50,
    E2elP99,
    /// Failed requests over all requests.
    ErrorRate,
    /// Requests that met every limit of the workload's SLO, per second of wall duration.
    Goodput,
    /// A structured-output workload's answers that kept to its schema, over those judged (absent for any other
    /// workload).
    StructuredRate,
    /// A request's decode rate, (n − 1) / (e2el − ttft): judged by the paired bench only.
    DecodeRate,
}

/// Where a bench level's pooled value of a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooled {
    /// Not a bench metric: a level has no value of it.
    No,
    /// At this path in the level's `metrics`.
    Metrics(&'static [&'static str]),
    /// The rate of the level's structured-output tally (`structured.rate`).
    StructuredRate,
}

/// What each metric is, in one place: see [`Metric::spec`].
struct Spec {
    key: &'static str,
    label: &'static str,
    unit: Unit,
    better: Better,
    /// Where the value pooled over a level's measured batches is.
    pooled: Pooled,
    /// The BMF measure's slug, before its unit.
    slug: &'static str,
    /// Sampled once per batch, and so compared with a stored baseline.
    sampled: bool,
    /// The name a manifest's `decide` gives it and the key of its values in `paired.json`, when the paired bench
    /// judges it.
    paired: Option<(&'static str, &'static str)>,
}

impl Metric {
    /// Every metric, in the order the writers list them (a table shows latencies, then rates: [`Metric::section`]).
    pub const ALL: &'static [Metric] = &[
        Metric::OutputThroughput,
        Metric::TtftMean,
        Metric::TtftP50,
        Metric::TtftP99,
        Metric::TpotMean,
        Metric::ItlP99,
        Metric::E2elMean,
        Metric::E2elP50,
        Metric::E2elP99,
        Metric::ErrorRate,
        Metric::Goodput,
        Metric::StructuredRate,
        Metric::DecodeRate,
    ];

    /// The metrics of a bench level, in [`Metric::ALL`]'s order: what every bench writer shows. Every metric but the
    /// last of [`Metric::ALL`], the paired bench's own decode rate (a bench level has no pooled value of it), so a new
    /// bench metric is listed once.
    pub const BENCH: &'static [Metric] = Metric::ALL.split_at(Metric::ALL.len() - 1).0;

    /// The metrics the paired bench judges, in the order `paired.json` lists them.
    pub const PAIRED: &'static [Metric] = &[Metric::DecodeRate, Metric::TtftMean, Metric::TpotMean, Metric::E2elMean];

    fn spec(self) -> Spec {
        use Better::{Higher, Lower};
        use Unit::{Fraction, RequestsPerSecond, Seconds, TokensPerSecond};
        let s = |key, label, unit, better, pooled, slug| Spec {
            key,
            label,
            unit,
            better,
            pooled: Pooled::Metrics(pooled),
            slug,
            sampled: false,
            paired: None,
        };
        match self {
            Metric::OutputThroughput => Spec {
                sampled: true,
                ..s(
                    "output_throughput_wall",
                    "output",
                    TokensPerSecond,
                    Higher,
                    &["output_throughput_wall"],
                    "output-throughput",
                )
            },
            Metric::TtftMean => Spec {
                sampled: true,
                paired: Some(("ttft", "ttft")),
                ..s("ttft_mean", "TTFT mean", Seconds, Lower, &["ttft", "mean"], "ttft-mean")
            },
            Metric::TtftP50 => s("ttft_p50", "TTFT p50", Seconds, Lower, &["ttft", "p50"], "ttft-p50"),
            Metric::TtftP99 => s("ttft_p99", "TTFT p99", Seconds, Lower, &["ttft", "p99"], "ttft-p99"),
            Metric::TpotMean => Spec {
                sampled: true,
                paired: Some(("itl", "itl_mean")),
                ..s("tpot_mean", "TPOT mean", Seconds, Lower, &["tpot", "mean"], "tpot-mean")
            },
            Metric::ItlP99 => s("itl_chunk_p99", "ITL p99", Seconds, Lower, &["itl_chunk", "p99"], "itl-p99"),
            Metric::E2elMean => Spec {
                sampled: true,
                paired: Some(("e2el", "e2el")),
                ..s("e2el_mean", "E2EL mean", Seconds, Lower, &["e2el", "mean"], "e2el-mean")
            },
            Metric::E2elP50 => s("e2el_p50", "E2EL p50", Seconds, Lower, &["e2el", "p50"], "e2el-p50"),
            Metric::E2elP99 => s("e2el_p99", "E2EL p99", Seconds, Lower, &["e2el", "p99"], "e2el-p99"),
            Metric::ErrorRate => s("error_rate", "error rate", Fraction, Lower, &["error_rate"], "error-rate"),
            Metric::Goodput => s("goodput_wall", "goodput", RequestsPerSecond, Higher, &["goodput_wall"], "goodput"),
            Metric::StructuredRate => Spec {
                pooled: Pooled::StructuredRate,
                ..s("structured_valid_rate", "schema kept", Fraction, Higher, &[], "structured-valid-rate")
            },
            Metric::DecodeRate => Spec {
                paired: Some(("decode", "decode_tokens_per_second")),
                pooled: Pooled::No,
                ..s("decode_tokens_per_second", "decode", TokensPerSecond, Higher, &[], "decode")
            },
        }
    }

    /// The key in the records: a bench level's `samples` and sub-session `means`, a comparison's `metric`.
    pub fn key(self) -> &'static str {
        self.spec().key
    }

    /// The metric of a record's key ([`Metric::key`]); `None` for a key this version does not know.
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.iter().copied().find(|m| m.key() == key)
    }

    /// Its name where it is shown: "TTFT p99", "output".
    pub fn label(self) -> &'static str {
        self.spec().label
    }

    pub fn unit(self) -> Unit {
        self.spec().unit
    }

    pub fn better(self) -> Better {
        self.spec().better
    }

    /// A table's column heading: its name and shown unit ("TTFT p99 ms", "output tok/s", "error rate %").
    pub fn column(self) -> String {
        format!("{} {}", self.label(), self.unit().shown())
    }

    /// Its BMF measure (and CSV `metric`): "ttft-p99-ms", "output-throughput-tok-per-s", "error-rate".
    pub fn slug(self) -> String {
        format!("{}{}", self.spec().slug, self.unit().slug())
    }

    /// Where its value pooled over a level is ([`Pooled::No`] for [`Metric::DecodeRate`], which only the paired
    /// bench measures).
    pub fn pooled(self) -> Pooled {
        self.spec().pooled
    }

    /// Latencies first, then rates: the order a table shows them in.
    pub fn section(self) -> Section {
        match self.unit() {
            Unit::Seconds => Section::Latency,
            Unit::TokensPerSecond | Unit::RequestsPerSecond | Unit::Fraction => Section::Rate,
        }
    }

    /// Whether a bench samples it once per batch (a level's `samples`), and so compares it with a stored baseline.
    pub fn sampled(self) -> bool {
        self.spec().sampled
    }

    /// The metrics a bench samples per batch, in [`Metric::ALL`]'s order.
    pub fn sampled_all() -> impl Iterator<Item = Metric> {
        Metric::ALL.iter().copied().filter(|m| m.sampled())
    }

    /// The name a manifest's `[profiles.P.bench] decide` gives it, when the paired bench judges it.
    pub fn decide_name(self) -> Option<&'static str> {
        self.spec().paired.map(|(short, _)| short)
    }

    /// The key of its values in `paired.json` (`values`, `metrics[].metric`), when the paired bench judges it.
    pub fn paired_key(self) -> Option<&'static str> {
        self.spec().paired.map(|(_, key)| key)
    }

    /// The paired metric of a `paired.json` key.
    pub fn from_paired_key(key: &str) -> Option<Metric> {
        Metric::PAIRED.iter().copied().find(|m| m.paired_key() == Some(key))
    }

    /// A value in its shown unit with one decimal ("123.4"), or "—" when there is none.
    pub fn show(self, value: Option<f64>) -> String {
        value.filter(|x| x.is_finite()).map_or("—".to_owned(), |x| format!("{:.1}", x * self.unit().shown_factor()))
    }
}

/// Where a table shows a metric: latencies first, then rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    Latency,
    Rate,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_slugs_and_paired_names_are_unique_and_read_back() {
        let mut keys: Vec<&str> = Metric::ALL.iter().map(|m| m.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Metric::ALL.len());
        let mut slugs: Vec<String> = Metric::ALL.iter().map(|m| m.slug()).collect();
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), Metric::ALL.len());
        for m in Metric::ALL {
            assert_eq!(Metric::from_key(m.key()), Some(*m));
            if let Some(k) = m.paired_key() {
                assert_eq!(Metric::from_paired_key(k), Some(*m));
            }
        }
        assert_eq!(Metric::from_key("server_tpot_mean"), None);
    }

    /// BENCH and PAIRED are the slices of ALL they say they are: a bench metric has a pooled value, a paired one a
    /// key in `paired.json`, and every metric is one or the other.
    #[test]
    fn the_slices_are_the_metrics_with_the_matching_spec() {
        let bench: Vec<Metric> = Metric::ALL.iter().copied().filter(|m| m.pooled() != Pooled::No).collect();
        assert_eq!(bench, Metric::BENCH);
        let mut paired: Vec<Metric> = Metric::ALL.iter().copied().filter(|m| m.paired_key().is_some()).collect();
        let mut listed = Metric::PAIRED.to_vec();
        paired.sort();
        listed.sort();
        assert_eq!(paired, listed);
        assert!(Metric::ALL.iter().all(|m| Metric::BENCH.contains(m) || Metric::PAIRED.contains(m)));
        assert!(Metric::sampled_all().all(|m| Metric::BENCH.contains(&m)));
    }

    /// The names the records and exports had before the metrics were a type: changing one changes a format.
    #[test]
    fn record_keys_and_export_slugs_stay_as_they_were() {
        let keys: Vec<&str> = Metric::sampled_all().map(Metric::key).collect();
        assert_eq!(keys, ["output_throughput_wall", "ttft_mean", "tpot_mean", "e2el_mean"]);
        let paired: Vec<(&str, &str)> =
            Metric::PAIRED.iter().map(|m| (m.decide_name().unwrap(), m.paired_key().unwrap())).collect();
        assert_eq!(
            paired,
            [("decode", "decode_tokens_per_second"), ("ttft", "ttft"), ("itl", "itl_mean"), ("e2el", "e2el")]
        );
        assert_eq!(Metric::OutputThroughput.slug(), "output-throughput-tok-per-s");
        assert_eq!(Metric::TtftP99.slug(), "ttft-p99-ms");
        assert_eq!(Metric::ErrorRate.slug(), "error-rate");
        assert_eq!(Metric::Goodput.slug(), "goodput-req-per-s");
        assert_eq!(Metric::StructuredRate.slug(), "structured-valid-rate");
        assert_eq!(Metric::StructuredRate.column(), "schema kept %");
        assert_eq!(Metric::TtftP50.column(), "TTFT p50 ms");
        assert_eq!(Metric::OutputThroughput.column(), "output tok/s");
        assert_eq!(Metric::ErrorRate.column(), "error rate %");
        assert_eq!(Metric::ErrorRate.show(Some(0.25)), "25.0");
    }
}
