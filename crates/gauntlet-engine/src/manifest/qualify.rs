//! A profile's `[profiles.P.qualify]` table: what release qualification runs (DESIGN §10). Every key has a default
//! small enough for a CI runner; the settings are snapshotted into the evidence bundle, so `verify` judges the
//! evidence by the rules it was produced under, not by whatever the manifest says today.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Value;

use super::contract::{self, keys};
use super::fields::{Problems, Reader, join, type_name};
use gauntlet_schema::bench::{Corpus, Workload};
use serde_json::Value as Json;

pub use gauntlet_schema::qualify::Stage;

pub use super::contract::RATE_RANGE;
pub(crate) use super::contract::{CONCURRENCY_MAX, LM_EVAL_LIMIT_MAX, MAX_TOKENS_MAX, SAMPLES_MAX, WARMUPS_MAX};

/// A workload assembled from flags over the manifest's: every number within the ranges the manifest enforces
/// (at least one measured batch), so no absurd value reaches the scheduler.
pub fn workload_problem(w: &Workload) -> Option<String> {
    if let Some(r) = w.rate
        && !RATE_RANGE.contains(&r)
    {
        return Some(format!(
            "--rate: {r} is not a rate gauntlet can pace (want {}..={} requests per second)",
            RATE_RANGE.start(),
            RATE_RANGE.end()
        ));
    }
    let within = |n: usize, lo: i64, hi: i64| (lo..=hi).contains(&i64::try_from(n).unwrap_or(i64::MAX));
    // A field workload's one level is its trace's rows or its conversations, bounded where it was read.
    let concurrency_max = if w.field.is_some() { i64::MAX } else { CONCURRENCY_MAX };
    if w.concurrency.is_empty() || !w.concurrency.iter().all(|&c| within(c, 1, concurrency_max)) {
        return Some(format!("--concurrency: each level must be within 1..={CONCURRENCY_MAX}"));
    }
    if !(1..=MAX_TOKENS_MAX as u64).contains(&w.max_tokens) {
        return Some(format!("--max-tokens: must be within 1..={MAX_TOKENS_MAX}"));
    }
    if !within(w.warmups, 0, WARMUPS_MAX) {
        return Some(format!("--warmups: must be within 0..={WARMUPS_MAX}"));
    }
    if !within(w.repetitions, 1, SAMPLES_MAX) {
        return Some(format!("--samples: must be within 1..={SAMPLES_MAX}"));
    }
    None
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum QualitySet {
    /// The built-in arithmetic word problems (`qualify::words`), identified by version, seed and count.
    Arithmetic { version: u32, seed: u64, count: usize },
    /// A JSONL file in GSM8K's format; its sha256 is recorded in the bundle.
    Jsonl { path: PathBuf },
    /// lm-evaluation-harness tasks run against the server (`qualify::r2_quality`): the score is each task's
    /// `metric` (or its only metric), and the lowest task's score is judged against the floor.
    LmEval(LmEval),
}

/// `quality.lm_eval`: which lm-evaluation-harness tasks R2 runs, on how many documents, from which folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LmEval {
    pub tasks: Vec<String>,
    /// Documents per task (`--limit`); none = every document.
    pub limit: Option<u64>,
    /// A folder of task YAML files (`--include_path`), inside the manifest root; lm-eval runs in it, so a
    /// task's relative `data_files` resolve there.
    pub include_path: Option<PathBuf>,
    /// The results key taken as the score, e.g. `exact_match,first-number`; none = the task's only metric.
    pub metric: Option<String>,
}

/// A task or metric name reaches lm-eval's command line inside comma-separated lists: letters, digits and
/// `_ - . ,` (metric only) keep it one name.
fn lm_eval_name_ok(name: &str, comma: bool) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b) || (comma && b == b','))
}

/// A task name of `quality.lm_eval.tasks`, from the manifest or from a bundle's snapshot: letters, digits, `_ - .`
/// and no `..` (it names the bundle's samples file, which must stay one file name inside the bundle).
/// A task name R2 passes to lm-eval and names a samples file after (`r2-lm-eval-samples-{task}.jsonl`): no `..`,
/// and no final `.`, which would put `..` into that file's name (the fuzzer's task `.`).
pub fn lm_eval_task_ok(name: &str) -> bool {
    lm_eval_name_ok(name, false) && !name.contains("..") && !name.ends_with('.')
}

fn read_lm_eval(p: &mut Problems, qr: &Reader, root: &Path) -> Option<LmEval> {
    let t = qr.table_of(p, "lm_eval")?;
    let path = qr.at("lm_eval");
    p.unknown_keys(t, &path, keys::<contract::LmEvalTable>());
    let r = Reader::new(t, path);
    let tasks = match r.string_array(p, "tasks") {
        None if !r.has("tasks") => {
            p.error(&r.at("tasks"), "required (the lm-eval task names R2 runs)");
            Vec::new()
        }
        None => Vec::new(),
        Some(tasks) => {
            if tasks.is_empty() {
                p.error(&r.at("tasks"), "names no task");
            }
            for (i, task) in tasks.iter().enumerate() {
                if !lm_eval_task_ok(task) {
                    p.error(
                        &format!("{}[{i}]", r.at("tasks")),
                        format!(
                            "`{}` is not a task name (letters, digits, `_`, `-`, `.`, no `..`)",
                            task.escape_debug()
                        ),
                    );
                }
            }
            tasks
        }
    };
    let limit = r.integer(p, "limit", 1, LM_EVAL_LIMIT_MAX).map(|n| n as u64);
    let include_path = r.string(p, "include_path").and_then(|rel| {
        let dir = super::fields::inside_root(p, &r.at("include_path"), root, &rel)?;
        if !dir.is_dir() {
            p.error(&r.at("include_path"), format!("`{}` is not a folder of task files", dir.display()));
        }
        Some(dir)
    });
    let metric = r.string(p, "metric");
    if let Some(m) = &metric
        && !lm_eval_name_ok(m, true)
    {
        p.error(&r.at("metric"), format!("`{}` is not a results key such as `exact_match,none`", m.escape_debug()));
    }
    Some(LmEval { tasks, limit, include_path, metric })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quality {
    pub set: QualitySet,
    /// Accuracy at or above this passes R2.
    pub floor: f64,
    pub max_tokens: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QualifySettings {
    /// R3's concurrency and R4's top level.
    pub max_concurrency: usize,
    pub quality: Quality,
    /// R4: concurrency 1, 2 and max, this many tokens, warm-ups and batches.
    pub saturation: Workload,
    /// R5: the measured samples compared with the baseline.
    pub performance: Workload,
    /// R6: seconds between monitor samples, and the drift limits.
    pub monitor_interval_seconds: f64,
    pub monitor: DriftLimits,
    /// Per stage, seconds.
    pub timeouts: std::collections::BTreeMap<String, f64>,
    /// A git work tree whose tracked files must be clean (R0); none declared = not checked, and R0 says so.
    pub source: Option<PathBuf>,
}

impl QualifySettings {
    pub fn timeout(&self, stage: Stage) -> Duration {
        Duration::from_secs_f64(self.timeouts.get(stage.as_str()).copied().unwrap_or(600.0))
    }
}

fn default_settings(load_timeout: Duration, suite_budget: Duration) -> QualifySettings {
    let timeouts = [
        (Stage::R0, load_timeout.as_secs_f64() + 120.0),
        (Stage::R1, suite_budget.as_secs_f64() + 30.0),
        (Stage::R2, 900.0),
        // The determinism matrix asks the suite six times (reference, repeat, cold cache, streamed, the
        // concurrent copies at two slots' pace, after the restart) and waits for one more load.
        (Stage::R3, suite_budget.as_secs_f64() * 6.0 + load_timeout.as_secs_f64() + 30.0),
        (Stage::R4, 600.0),
        (Stage::R5, 1200.0),
        (Stage::R6, 60.0),
        (Stage::R7, 120.0),
    ];
    QualifySettings {
        max_concurrency: 2,
        quality: Quality {
            set: QualitySet::Arithmetic { version: 1, seed: 1, count: 20 },
            floor: 0.0,
            max_tokens: 160,
        },
        saturation: Workload::new(vec![1, 2], 32, 1, 2),
        performance: Workload::new(vec![1, 2], 32, 1, 5),
        monitor_interval_seconds: 0.5,
        monitor: DriftLimits {
            window: 5,
            max_rss_growth_mib: 256.0,
            max_health_latency_growth: 3.0,
            health_latency_slack_seconds: 0.05,
            max_gpu_memory_growth_mib: None,
            require_rss: true,
        },
        timeouts: timeouts.into_iter().map(|(k, v)| (k.as_str().to_owned(), v)).collect(),
        source: None,
    }
}

fn counts(p: &mut Problems, r: &Reader, key: &str) -> Option<Vec<usize>> {
    let Value::Array(items) = r.table.get(key)? else {
        p.error(&r.at(key), "expected an array of positive integers");
        return None;
    };
    let mut out = Vec::new();
    for (i, v) in items.iter().enumerate() {
        match v {
            Value::Integer(n) if (1..=CONCURRENCY_MAX).contains(n) => out.push(*n as usize),
            other => p.error(
                &format!("{}[{i}]", r.at(key)),
                format!("expected an integer in 1..={CONCURRENCY_MAX}, found {}", type_name(other)),
            ),
        }
    }
    (!out.is_empty()).then_some(out)
}

fn workload(p: &mut Problems, r: &Reader, key: &str, w: Workload) -> Workload {
    workload_with(p, r, key, w, keys::<contract::QualifyWorkload>())
}

/// A workload table (`concurrency`, `max_tokens`, `warmups`, `samples`) of a table whose keys are `known`.
/// `repetitions` is the deprecated name of `samples` (the flag `bench --repetitions` was): read with a warning.
fn workload_with(p: &mut Problems, r: &Reader, key: &str, mut w: Workload, known: &[&str]) -> Workload {
    let Some(t) = r.table_of(p, key) else { return w };
    let path = r.at(key);
    p.unknown_keys(t, &path, known);
    let r = Reader::new(t, path);
    if let Some(c) = counts(p, &r, "concurrency") {
        w.concurrency = c;
    }
    if let Some(n) = r.integer(p, "max_tokens", 1, MAX_TOKENS_MAX) {
        w.max_tokens = n as u64;
    }
    if let Some(n) = r.integer(p, "warmups", 0, WARMUPS_MAX) {
        w.warmups = n as usize;
    }
    if let Some(n) = r.integer(p, "samples", 2, SAMPLES_MAX) {
        w.repetitions = n as usize;
    }
    if r.has("repetitions") {
        if r.has("samples") {
            p.error(&r.at("repetitions"), "`repetitions` is the deprecated name of `samples`: give `samples` only");
        } else if let Some(n) = r.integer(p, "repetitions", 2, SAMPLES_MAX) {
            p.warnings.push(format!("{}: `repetitions` is deprecated: call it `samples`", r.at("repetitions")));
            w.repetitions = n as usize;
        }
    }
    w
}

/// `[profiles.P.bench.slo]`: goodput limits `ttft`, `tpot`, `e2el` (durations, e.g. "500ms"); at least one.
fn read_slo(p: &mut Problems, b: &Reader) -> Option<gauntlet_schema::bench::Slo> {
    let t = b.table_of(p, "slo")?;
    let path = b.at("slo");
    p.unknown_keys(t, &path, keys::<contract::Slo>());
    let r = Reader::new(t, path.clone());
    let limit = Duration::from_secs(3600);
    let secs = |p: &mut Problems, key: &str| r.duration(p, key, limit).map(|d| d.as_secs_f64());
    let slo = gauntlet_schema::bench::Slo { ttft: secs(p, "ttft"), tpot: secs(p, "tpot"), e2el: secs(p, "e2el") };
    if slo == gauntlet_schema::bench::Slo::default() {
        p.error(&path, "give at least one of `ttft`, `tpot`, `e2el` (goodput counts requests meeting all given)");
        return None;
    }
    Some(slo)
}

/// `[profiles.P.bench]`: the workload `gauntlet bench` runs when its flags do not say otherwise, with `prompts`, a
/// JSONL corpus (relative to the manifest) of `{"prompt": "…"}` lines, instead of the built-in prompts.
pub(crate) fn read_bench_workload(p: &mut Problems, r: &Reader, root: &Path) -> Workload {
    let mut w = workload_with(p, r, "bench", Workload::new(vec![1, 2], 64, 1, 5), keys::<contract::Bench>());
    let Some(t) = r.table_of(p, "bench") else { return w };
    let b = Reader::new(t, r.at("bench"));
    w.slo = read_slo(p, &b);
    w.rate = b.float(p, "rate", *RATE_RANGE.start(), *RATE_RANGE.end());
    w.seed = b.integer(p, "seed", 0, i64::MAX).map(|s| s as u64);
    w.response_format = read_response_format(p, &b);
    if let Some((field, data)) = super::field::read_field(p, &b, root) {
        if b.has("prompts") || b.has("rate") {
            p.error(&b.at("workload"), "a field workload brings its own prompts and times: drop `prompts` and `rate`");
        }
        if b.has("response_format") {
            // A field workload builds its own requests (the conversation so far, a trace's prompts): nothing there
            // would send the format or judge the answer, so the key would be silently ignored.
            p.error(
                &b.at("response_format"),
                "a field workload sends its own requests: structured output is not judged there",
            );
        }
        // A trace replays all its rows a batch; conversations all run at once.
        w.concurrency = vec![field.concurrency()];
        w.field = Some(field);
        w.field_data = data;
        return w;
    }
    let Some(rel) = b.string(p, "prompts") else { return w };
    let file = root.join(&rel);
    let bytes = match crate::util::bounded::read_named_bytes(&file, crate::util::bounded::RECORD_CAP) {
        Ok(b) => b,
        Err(e) => {
            p.error(&b.at("prompts"), format!("cannot read `{}`: {e}", file.display()));
            return w;
        }
    };
    match read_corpus(&String::from_utf8_lossy(&bytes)) {
        Ok(prompts) => {
            w.corpus = Some(Corpus { path: rel, sha256: crate::util::sha256_hex(&bytes), prompts: prompts.len() });
            w.prompts = prompts;
        }
        Err(errors) => {
            let shown: Vec<&str> = errors.iter().take(5).map(String::as_str).collect();
            p.error(&b.at("prompts"), format!("`{}`: {}", file.display(), shown.join("; ")));
        }
    }
    w
}

/// `[profiles.P.bench] response_format`: a `json_schema` format (its schema must compile), validated as the
/// suite validates a case's; `json_object` is refused here, since a bench judges answers against a schema.
fn read_response_format(p: &mut Problems, b: &Reader) -> Option<Json> {
    let t = b.table_of(p, "response_format")?;
    let at = b.at("response_format");
    // Closed like every manifest table (the schema says so): a misspelt key would otherwise go to the server.
    p.unknown_keys(t, &at, &["type", "json_schema"]);
    if let Some(Value::Table(js)) = t.get("json_schema") {
        p.unknown_keys(js, &format!("{at}.json_schema"), &["name", "description", "strict", "schema"]);
    }
    match crate::suite::response_format(t) {
        Ok(v) if v["type"] == "json_schema" => Some(v),
        Ok(_) => {
            p.error(&format!("{at}.type"), "a bench judges answers against a schema: give `json_schema`");
            None
        }
        Err(e) => {
            // The suite's message is a key suffix and a reason (".json_schema.schema: not a valid JSON Schema: …").
            let e = e.to_string();
            let (key, why) = e.split_once(": ").unwrap_or(("", &e));
            p.error(&format!("{at}{key}"), why);
            None
        }
    }
}

/// `[profiles.P.bench] paired`: `"both"` (default) or `"alternate"`; true for alternate.
pub(crate) fn read_bench_paired(p: &mut Problems, r: &Reader) -> bool {
    let Some(t) = r.table_of(p, "bench") else { return false };
    let b = Reader::new(t, r.at("bench"));
    match b.string(p, "paired").as_deref() {
        None | Some("both") => false,
        Some("alternate") => true,
        Some(other) => {
            p.error(&b.at("paired"), format!("`{other}`: expected \"both\" or \"alternate\""));
            false
        }
    }
}

/// `[profiles.P.bench] decide`: a non-empty list of distinct metric names (`decode`, `ttft`, `itl`, `e2el`) a
/// paired bench's verdict rests on; `None` when absent or wrong (an error then).
pub(crate) fn read_bench_decide(p: &mut Problems, r: &Reader) -> Option<Vec<String>> {
    let t = r.table_of(p, "bench")?;
    let b = Reader::new(t, r.at("bench"));
    let names = b.string_array(p, "decide")?;
    let known: Vec<&str> = gauntlet_schema::Metric::PAIRED.iter().filter_map(|m| m.decide_name()).collect();
    let expected = || format!("expected some of {}", known.join(", "));
    if names.is_empty() {
        p.error(&b.at("decide"), format!("an empty list decides nothing: {}", expected()));
        return None;
    }
    for (i, n) in names.iter().enumerate() {
        if !known.contains(&n.as_str()) {
            p.error(&b.at("decide"), format!("{n:?}: {}", expected()));
            return None;
        }
        if names[..i].contains(n) {
            p.error(&b.at("decide"), format!("{n:?} is named twice"));
            return None;
        }
    }
    Some(names)
}

pub(crate) fn read_qualify(
    p: &mut Problems,
    r: &Reader,
    root: &Path,
    load_timeout: Duration,
    suite_budget: Duration,
) -> QualifySettings {
    let mut s = default_settings(load_timeout, suite_budget);
    let Some(t) = r.table_of(p, "qualify") else { return s };
    let path = r.at("qualify");
    p.unknown_keys(t, &path, keys::<contract::Qualify>());
    let q = Reader::new(t, path.clone());
    if let Some(n) = q.integer(p, "max_concurrency", 2, 4096) {
        s.max_concurrency = n as usize;
    }
    s.saturation.concurrency = vec![1, 2, s.max_concurrency];
    s.saturation.concurrency.dedup();
    s.saturation = workload(p, &q, "saturation", s.saturation);
    s.performance = workload(p, &q, "performance", s.performance);
    if let Some(src) = q.string(p, "source") {
        s.source = Some(root.join(src));
    }
    if let Some(qt) = q.table_of(p, "quality") {
        let qp = join(&path, "quality");
        p.unknown_keys(qt, &qp, keys::<contract::Quality>());
        let qr = Reader::new(qt, qp);
        if qr.has("lm_eval") {
            // lm-eval brings its own documents, prompts and generation settings.
            for key in ["set", "seed", "count", "max_tokens"] {
                if qr.has(key) {
                    p.error(&qr.at(key), "does not apply with `lm_eval` (its tasks bring their own)");
                }
            }
        }
        let seed = qr.integer(p, "seed", 0, i64::MAX).map(|n| n as u64).unwrap_or(1);
        let count = qr.integer(p, "count", 1, 100_000).map(|n| n as usize).unwrap_or(20);
        match qr.string(p, "set").as_deref() {
            _ if qr.has("lm_eval") => {
                if let Some(l) = read_lm_eval(p, &qr, root) {
                    s.quality.set = QualitySet::LmEval(l);
                }
            }
            None | Some("arith-v1") => s.quality.set = QualitySet::Arithmetic { version: 1, seed, count },
            Some(other) if other.starts_with("arith-v") => {
                p.error(&qr.at("set"), format!("`{other}`: this gauntlet generates arith-v1 only"))
            }
            Some(file) => {
                for key in ["seed", "count"] {
                    if qr.has(key) {
                        p.error(&qr.at(key), "only applies to the built-in set `arith-v1`");
                    }
                }
                let path = root.join(file);
                if !path.is_file() {
                    p.error(&qr.at("set"), format!("`{}` is not a file (want GSM8K-style JSONL)", path.display()));
                }
                s.quality.set = QualitySet::Jsonl { path };
            }
        }
        if let Some(f) = qr.float(p, "floor", 0.0, 1.0) {
            s.quality.floor = f;
        }
        if let Some(n) = qr.integer(p, "max_tokens", 1, 1 << 20) {
            s.quality.max_tokens = n as u64;
        }
    }
    if let Some(mt) = q.table_of(p, "monitor") {
        let mp = join(&path, "monitor");
        p.unknown_keys(mt, &mp, keys::<contract::Monitor>());
        let m = Reader::new(mt, mp);
        if let Some(d) = m.duration(p, "interval", Duration::from_secs(60)) {
            s.monitor_interval_seconds = d.as_secs_f64();
        }
        if let Some(n) = m.integer(p, "window", 1, 10_000) {
            s.monitor.window = n as usize;
        }
        if let Some(x) = m.float(p, "max_rss_growth_mib", 0.0, 1e9) {
            s.monitor.max_rss_growth_mib = x;
        }
        if let Some(x) = m.float(p, "max_health_latency_growth", 0.0, 1e6) {
            s.monitor.max_health_latency_growth = x;
        }
        if let Some(x) = m.float(p, "max_gpu_memory_growth_mib", 0.0, 1e9) {
            s.monitor.max_gpu_memory_growth_mib = Some(x);
        }
    }
    if let Some(tt) = q.table_of(p, "timeouts") {
        let tp = join(&path, "timeouts");
        p.unknown_keys(tt, &tp, keys::<contract::Timeouts>());
        let tr = Reader::new(tt, tp);
        for stage in Stage::ALL {
            if let Some(d) = tr.duration(p, stage.as_str(), Duration::from_secs(24 * 3600)) {
                s.timeouts.insert(stage.as_str().into(), d.as_secs_f64());
            }
        }
    }
    s
}

/// R6's drift limits (`[profiles.P.qualify.monitor]`); `crate::qualify::drift` judges samples against them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftLimits {
    /// Samples per window. The first window is warm-up and skipped; the early window is the second.
    pub window: usize,
    pub max_rss_growth_mib: f64,
    pub max_health_latency_growth: f64,
    /// Health latency growth only counts when the late median also exceeds the early one by this many seconds:
    /// a probe going from 1 ms to 5 ms under load is noise, not drift.
    #[serde(default = "default_slack")]
    pub health_latency_slack_seconds: f64,
    pub max_gpu_memory_growth_mib: Option<f64>,
    /// Whether RSS must be readable (a spawned server: yes; an attached one: it cannot be).
    pub require_rss: bool,
}

fn default_slack() -> f64 {
    0.05
}

/// Prompts from a JSONL corpus: one object per line with a non-empty string `prompt` (vLLM's custom-dataset
/// layout); blank lines are skipped. Every bad line is reported with its number.
pub fn read_corpus(text: &str) -> Result<Vec<String>, Vec<String>> {
    let mut prompts = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match serde_json::from_str::<Json>(line) {
            Ok(v) => match v.get("prompt").and_then(Json::as_str).filter(|p| !p.trim().is_empty()) {
                Some(p) => prompts.push(p.to_owned()),
                None => errors.push(format!("line {}: no non-empty string `prompt`", i + 1)),
            },
            Err(e) => errors.push(format!("line {}: not JSON ({e})", i + 1)),
        }
    }
    if prompts.is_empty() && errors.is_empty() {
        errors.push("no prompt in the corpus".into());
    }
    if errors.is_empty() { Ok(prompts) } else { Err(errors) }
}

#[cfg(test)]
mod task_name_tests {
    use super::lm_eval_task_ok;

    #[test]
    fn a_task_name_never_puts_dot_dot_into_its_samples_file() {
        assert!(lm_eval_task_ok("gsm8k") && lm_eval_task_ok("mmlu.high_school"));
        for bad in [".", "gsm8k.", "a..b", "../x", "a/b"] {
            assert!(!lm_eval_task_ok(bad), "`{bad}` accepted");
        }
    }
}
