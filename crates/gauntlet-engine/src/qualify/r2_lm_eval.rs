//! R2 through lm-evaluation-harness: its `local-chat-completions` model pointed at the session's server, offline,
//! in its own process group under the stage's deadline; its results and per-document samples are copied into the
//! bundle, and the score rule here is the one `verify` recomputes from those files. Never starts lm-eval when it
//! is not installed (that is infrastructure, named with the command that installs it), never puts the API key on
//! a command line, and never reads lm-eval's output unbounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::Client;
use crate::manifest::{LmEval, Profile, QualitySet, Stage};
use crate::server::{ServerProcess, describe_exit};

/// The lm-eval release R2 is written against (its CLI flags, results layout and model name).
pub const LM_EVAL_VERSION: &str = "0.4.13";
/// Where `scripts/setup.sh --test` installs it, under gauntlet's home.
pub const LM_EVAL_VENV: &str = "lm-eval";
pub const RESULTS_FILE: &str = "r2-lm-eval-results.json";
pub const LOG_FILE: &str = "r2-lm-eval.log";
/// lm-eval's results and samples files are read up to this size; a larger one is a failure, not a huge read.
const MAX_OUTPUT_BYTES: u64 = 64 << 20;
/// Time kept back from the stage's timeout to stop lm-eval by escalation before the stage itself is abandoned.
const STOP_MARGIN: Duration = Duration::from_secs(8);
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The command that installs lm-eval where gauntlet looks for it first.
pub fn install_command() -> String {
    let venv = crate::util::home_dir().join(LM_EVAL_VENV);
    format!("python3 -m venv {v} && {v}/bin/pip install 'lm-eval[api]=={LM_EVAL_VERSION}'", v = venv.display())
}

/// lm-eval was found neither in gauntlet's own venv (`own`) nor on PATH.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "R2 runs lm-evaluation-harness, which is not installed (looked for `{}` and `lm-eval` on PATH); install it \
     with: {install}",
    own.display()
)]
pub struct LmEvalMissing {
    pub own: PathBuf,
    /// The command that installs it at `own` ([`install_command`]).
    pub install: String,
}

/// Why a task's score could not be recomputed from its samples ([`score_from_samples`]); `line` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    #[error("`{key}` names no filter")]
    NoFilter { key: String },
    #[error("line {line}: not JSON ({source})")]
    Json { line: usize, source: serde_json::Error },
    #[error("line {line}: `{metric}` is not a number")]
    NotANumber { line: usize, metric: String },
    #[error("no sample of filter `{filter}`")]
    NoSample { filter: String },
}

/// lm-eval's executable: gauntlet's own venv first, then `lm-eval` on PATH.
pub fn find_lm_eval() -> Result<PathBuf, LmEvalMissing> {
    find_lm_eval_in(&crate::util::home_dir(), std::env::var_os("PATH").as_deref())
}

/// [`find_lm_eval`] with gauntlet's home and PATH given.
fn find_lm_eval_in(home: &Path, path: Option<&std::ffi::OsStr>) -> Result<PathBuf, LmEvalMissing> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let own = home.join(LM_EVAL_VENV).join("bin").join("lm-eval");
    if executable(&own) {
        return Ok(own);
    }
    if let Some(path) = path {
        for dir in std::env::split_paths(path) {
            let candidate = dir.join("lm-eval");
            if dir.is_absolute() && executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Err(LmEvalMissing { own, install: install_command() })
}

/// Before anything starts: a qualification whose R2 needs lm-eval is infrastructure-blocked without it.
pub(crate) fn preflight(profile: &Profile, stages: &[Stage]) -> Result<(), LmEvalMissing> {
    match &profile.qualify.quality.set {
        QualitySet::LmEval(_) if stages.contains(&Stage::R2) => find_lm_eval().map(|_| ()),
        _ => Ok(()),
    }
}

/// One task's score as R2 judges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskScore {
    pub task: String,
    pub metric: String,
    pub value: f64,
}

fn lm_eval_key_ok(key: &str) -> bool {
    key.len() <= 200 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.,".contains(&b))
}

/// Per task, the score `lm.metric` (or the task's only metric) names in lm-eval's results JSON.
pub fn scores(results: &Value, lm: &LmEval) -> Result<Vec<TaskScore>, Vec<String>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for task in &lm.tasks {
        let Some(entry) = results["results"].get(task).and_then(Value::as_object) else {
            errors.push(format!("lm-eval's results hold no task `{task}`"));
            continue;
        };
        let metrics: BTreeMap<&str, f64> = entry
            .iter()
            // Only keys of a metric's shape count: a key is shown in the stage's summary and failures, so nothing
            // from the file with a control or markup character gets there.
            .filter(|(k, _)| k.contains(',') && !k.contains("_stderr,") && lm_eval_key_ok(k))
            .filter_map(|(k, v)| v.as_f64().map(|f| (k.as_str(), f)))
            .collect();
        let chosen = match &lm.metric {
            Some(m) => metrics.get_key_value(m.as_str()),
            None if metrics.len() == 1 => metrics.iter().next(),
            None => None,
        };
        match chosen {
            Some((k, v)) if v.is_finite() => out.push(TaskScore { task: task.clone(), metric: (*k).into(), value: *v }),
            Some((k, v)) => errors.push(format!("task `{task}`: metric `{k}` is {v}, not a score")),
            None => {
                let names: Vec<&str> = metrics.keys().copied().collect();
                let want = match &lm.metric {
                    Some(m) => format!("no metric `{m}`"),
                    None => "not exactly one metric; name one with `quality.lm_eval.metric`".into(),
                };
                errors.push(format!("task `{task}`: {want} (it has {})", names.join(", ")));
            }
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// R2's rule with lm-eval (recomputed by `verify`): lm-eval exited 0, every task has its score, and the lowest
/// score is at or above the floor. Returns that lowest score.
pub fn lm_eval_verdict(exit_ok: bool, scores: &Result<Vec<TaskScore>, Vec<String>>, floor: f64) -> (f64, Vec<String>) {
    let mut failures = Vec::new();
    if !exit_ok {
        failures.push(format!("lm-eval did not finish successfully (see {LOG_FILE})"));
    }
    let score = match scores {
        Err(errors) => {
            failures.extend(errors.iter().cloned());
            0.0
        }
        Ok(s) if s.is_empty() => {
            failures.push("no task was scored: no evidence".into());
            0.0
        }
        Ok(s) => {
            let low = s.iter().map(|t| t.value).fold(f64::INFINITY, f64::min);
            for t in s.iter().filter(|t| t.value < floor) {
                failures.push(format!("task `{}`: {} {:.3} is below the floor {floor}", t.task, t.metric, t.value));
            }
            low
        }
    };
    (score, failures)
}

/// The samples file of `task` in the bundle; none for a name that is not a task name (a bundle's snapshot is
/// untrusted: a task `/../x` would name a file outside it).
pub fn samples_file(task: &str) -> Option<String> {
    crate::manifest::lm_eval_task_ok(task).then(|| format!("r2-lm-eval-samples-{task}.jsonl"))
}

/// Recomputes a task's score from its per-document samples: the mean of the metric over the samples of the
/// filter the results key names (`exact_match,first-number` → field `exact_match`, filter `first-number`).
pub fn score_from_samples(text: &str, metric_key: &str) -> Result<(f64, usize), SamplesError> {
    let (metric, filter) =
        metric_key.split_once(',').ok_or_else(|| SamplesError::NoFilter { key: metric_key.to_owned() })?;
    let (mut sum, mut n) = (0.0, 0usize);
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|source| SamplesError::Json { line: i + 1, source })?;
        if v["filter"].as_str() != Some(filter) {
            continue;
        }
        let x = match &v[metric] {
            Value::Bool(b) => f64::from(u8::from(*b)),
            other => {
                other.as_f64().ok_or_else(|| SamplesError::NotANumber { line: i + 1, metric: metric.to_owned() })?
            }
        };
        sum += x;
        n += 1;
    }
    if n == 0 {
        return Err(SamplesError::NoSample { filter: filter.to_owned() });
    }
    Ok((sum / n as f64, n))
}

/// The text of lm-eval's file `name` in the bundle `dir`, by the one file rule (`util::bounded`): a plain file
/// name, a regular file that is not a symlink (never a FIFO or a device), refused past `MAX_OUTPUT_BYTES`.
pub fn read_bounded(dir: &Path, name: &str) -> Result<String, crate::util::bounded::ReadError> {
    crate::util::bounded::read_in(dir, name, MAX_OUTPUT_BYTES)
}

/// The task folder's files (plain files directly inside it) with their sha256: which task definition ran.
fn task_files(dir: &Path) -> Vec<Value> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).map(|d| d.flatten().collect()).unwrap_or_default();
    entries.sort_by_key(|e| e.file_name());
    entries
        .into_iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .take(256)
        .filter_map(|e| {
            let sha = crate::util::sha256_file(&e.path()).ok()?;
            Some(json!({"path": e.file_name().to_string_lossy(), "sha256": sha}))
        })
        .collect()
}

/// The newest `prefix*` file lm-eval wrote under `out` (it writes into one folder per model name).
fn written(out: &Path, prefix: &str, suffix: &str) -> Option<PathBuf> {
    let mut found = Vec::new();
    for d in std::fs::read_dir(out).ok()?.flatten().take(64) {
        if !d.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten().take(1024) {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) && name.ends_with(suffix) && f.file_type().is_ok_and(|t| t.is_file()) {
                found.push(f.path());
            }
        }
    }
    found.sort();
    found.pop()
}

/// What R2 returns: failures, summary, data for the stage file.
pub(super) type Judged = (Vec<String>, String, Value);

/// Runs lm-eval on `lm`'s tasks against the session's server, with `dir` the bundle.
pub(super) async fn run(client: &Client, profile: &Profile, lm: &LmEval, dir: &Path) -> Judged {
    let floor = profile.qualify.quality.floor;
    let deadline = Instant::now() + profile.qualify.timeout(Stage::R2).saturating_sub(STOP_MARGIN);
    let set = json!({"id": "lm-eval", "tasks": lm.tasks, "limit": lm.limit, "metric": lm.metric,
        "task_files": lm.include_path.as_deref().map(task_files)});
    let fail =
        |why: String, extra: Value| (vec![why.clone()], why, json!({"set": set, "floor": floor, "lm_eval": extra}));
    let program = match find_lm_eval() {
        Ok(p) => p,
        Err(e) => return fail(e.to_string(), json!({})),
    };
    let endpoint = client.url("v1/chat/completions");
    // lm-eval splits `--model_args` at commas and `=`: a value holding one would become another argument.
    if endpoint.contains([',', '=']) || profile.request_model.contains([',', '=']) {
        return fail(
            "the server URL or request model holds `,` or `=`, which lm-eval's model_args cannot carry".into(),
            json!({}),
        );
    }
    let work = dir.join(".r2-lm-eval");
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(work.join("hf")) {
        return fail(format!("cannot create `{}`: {e}", work.display()), json!({}));
    }
    let timeout = profile.request_timeout.as_secs().max(1);
    let mut argv = vec![
        program.display().to_string(),
        "run".into(),
        "--model".into(),
        "local-chat-completions".into(),
        "--model_args".into(),
        format!("base_url={endpoint},model={},num_concurrent=1,max_retries=1,timeout={timeout}", profile.request_model),
        "--apply_chat_template".into(),
        "--tasks".into(),
        lm.tasks.join(","),
        "--output_path".into(),
        work.join("out").display().to_string(),
        "--log_samples".into(),
    ];
    if let Some(n) = lm.limit {
        argv.extend(["--limit".into(), n.to_string()]);
    }
    if let Some(p) = &lm.include_path {
        argv.extend(["--include_path".into(), p.display().to_string()]);
    }
    // Offline: nothing may reach a model hub, and lm-eval's caches stay in the bundle's scratch folder.
    let hf = work.join("hf").display().to_string();
    let mut environment: BTreeMap<String, String> = [
        ("HF_DATASETS_OFFLINE", "1"),
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_EVALUATE_OFFLINE", "1"),
        ("HF_HUB_DISABLE_TELEMETRY", "1"),
        ("TQDM_DISABLE", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    environment.insert("HF_HOME".into(), hf);
    // The key goes by environment, never on the command line that `ps` shows and the log records.
    environment.insert("OPENAI_API_KEY".into(), client.api_key().unwrap_or("").to_owned());
    let log_path = dir.join(LOG_FILE);
    let recorded = json!({"version": LM_EVAL_VERSION, "program": program, "command": argv[1..], "log": LOG_FILE});
    let log = match crate::util::bounded::create(&log_path) {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot create `{}`: {e}", log_path.display()), recorded),
    };
    let started = Instant::now();
    let cwd = lm.include_path.as_deref().unwrap_or(&work);
    let mut process = match ServerProcess::spawn_group(&argv, &environment, Some(cwd), log, &log_path) {
        Ok(p) => p,
        Err(e) => return fail(format!("lm-eval did not start: {e}"), recorded),
    };
    // Polled rather than waited on, so that the stage's own timeout can still drop this future (the process's
    // Drop then kills and reaps its group).
    let status = loop {
        if let Some(s) = process.exited() {
            break Ok(s);
        }
        if Instant::now() >= deadline {
            break Err(process.stop(STOP_GRACE));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    let (exit, exit_ok) = match &status {
        Ok(s) => {
            // Anything it left behind in its group goes with it.
            let _ = process.stop(STOP_GRACE);
            (describe_exit(*s), s.success())
        }
        Err((outcome, _)) => (format!("stopped at the stage deadline ({outcome:?})"), false),
    };
    drop(process);
    let mut data = recorded;
    data["exit"] = json!(exit);
    data["exit_ok"] = json!(exit_ok);
    data["seconds"] = json!(seconds);
    let out = work.join("out");
    let mut copy_problems = Vec::new();
    if let Some(results) = written(&out, "results_", ".json") {
        if let Err(e) = crate::util::bounded::copy(&results, &dir.join(RESULTS_FILE), MAX_OUTPUT_BYTES) {
            copy_problems.push(format!("cannot keep lm-eval's results: {e}"));
        } else {
            data["results"] = json!(RESULTS_FILE);
        }
    }
    let mut samples = Vec::new();
    for task in &lm.tasks {
        if let (Some(f), Some(name)) = (written(&out, &format!("samples_{task}_"), ".jsonl"), samples_file(task)) {
            match crate::util::bounded::copy(&f, &dir.join(&name), MAX_OUTPUT_BYTES) {
                Ok(_) => samples.push(name),
                Err(e) => copy_problems.push(format!("cannot keep lm-eval's samples of `{task}`: {e}")),
            }
        }
    }
    data["samples"] = json!(samples);
    let _ = std::fs::remove_dir_all(&work);
    let scored = match data["results"].as_str() {
        Some(f) => read_bounded(dir, f)
            .map_err(|e| format!("{f}: {e}"))
            .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("{f}: not JSON: {e}")))
            .map_err(|e| vec![e])
            .and_then(|v| scores(&v, lm)),
        None => Err(vec!["lm-eval wrote no results".into()]),
    };
    let (score, mut failures) = lm_eval_verdict(exit_ok, &scored, floor);
    failures.extend(copy_problems);
    if let Ok(s) = &scored {
        data["scores"] = json!(s);
    }
    if !exit_ok {
        let tail: Vec<String> = crate::server::log_tail(&log_path, 5);
        data["log_tail"] = json!(tail);
    }
    let summary = match &scored {
        Ok(s) => {
            let each: Vec<String> = s.iter().map(|t| format!("{} {} {:.3}", t.task, t.metric, t.value)).collect();
            format!("lm-eval: {} (floor {floor})", each.join("; "))
        }
        Err(_) => failures.first().cloned().unwrap_or_default(),
    };
    (failures, summary, json!({"set": set, "floor": floor, "accuracy": score, "lm_eval": data}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found in neither place: the error names the venv path looked at; found on PATH or in the venv: that one.
    #[test]
    fn lm_eval_found_nowhere_is_lm_eval_missing_naming_the_venv() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let own = home.path().join(LM_EVAL_VENV).join("bin").join("lm-eval");
        let path = std::env::join_paths([Path::new("relative/bin"), bin.path()]).unwrap();
        let e = find_lm_eval_in(home.path(), Some(&path)).unwrap_err();
        assert_eq!(e.own, own);
        assert!(e.to_string().contains(&format!("looked for `{}` and `lm-eval` on PATH", own.display())), "{e}");
        let executable = |p: &Path| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let on_path = bin.path().join("lm-eval");
        executable(&on_path);
        assert_eq!(find_lm_eval_in(home.path(), Some(&path)).unwrap(), on_path);
        executable(&own);
        assert_eq!(find_lm_eval_in(home.path(), Some(&path)).unwrap(), own, "gauntlet's own venv comes first");
    }

    fn lm(tasks: &[&str], metric: Option<&str>) -> LmEval {
        LmEval {
            tasks: tasks.iter().map(|t| (*t).into()).collect(),
            limit: None,
            include_path: None,
            metric: metric.map(Into::into),
        }
    }

    /// lm-eval 0.4.13's layout: `results.TASK` with `METRIC,FILTER` keys beside their `_stderr` twins.
    fn results() -> Value {
        json!({"results": {
            "one": {"alias": "one", "sample_len": 6, "exact_match,last-number": 0.8333333333333334,
                    "exact_match_stderr,last-number": 0.16},
            "two": {"alias": "two", "exact_match,strict": 0.5, "x,<b>\u{1b}[31m": 1.0, "exact_match,flexible": 0.75,
                    "exact_match_stderr,strict": 0.1, "exact_match_stderr,flexible": "N/A"},
        }})
    }

    #[test]
    fn the_score_is_the_named_or_only_metric_and_the_lowest_task_is_judged() {
        let s = scores(&results(), &lm(&["one"], None)).unwrap();
        assert_eq!(
            s,
            vec![TaskScore { task: "one".into(), metric: "exact_match,last-number".into(), value: 0.8333333333333334 }]
        );
        // Two metrics and none named: refused rather than picked.
        let e = scores(&results(), &lm(&["two"], None)).unwrap_err();
        assert_eq!(
            e,
            vec![
                "task `two`: not exactly one metric; name one with `quality.lm_eval.metric` (it has exact_match,flexible, exact_match,strict)"
            ]
        );
        let s = scores(&results(), &lm(&["two"], Some("exact_match,flexible"))).unwrap();
        assert_eq!(s[0].value, 0.75);
        let e = scores(&results(), &lm(&["one", "three"], None)).unwrap_err();
        assert_eq!(e, vec!["lm-eval's results hold no task `three`"]);

        let two = Ok(vec![
            TaskScore { task: "a".into(), metric: "m,f".into(), value: 0.9 },
            TaskScore { task: "b".into(), metric: "m,f".into(), value: 0.4 },
        ]);
        assert_eq!(lm_eval_verdict(true, &two, 0.4), (0.4, vec![]));
        assert_eq!(
            lm_eval_verdict(true, &two, 0.5),
            (0.4, vec!["task `b`: m,f 0.400 is below the floor 0.5".to_owned()])
        );
        let (_, f) = lm_eval_verdict(false, &two, 0.0);
        assert_eq!(f, vec![format!("lm-eval did not finish successfully (see {LOG_FILE})")]);
        assert_eq!(lm_eval_verdict(true, &Ok(vec![]), 0.0).1, vec!["no task was scored: no evidence".to_owned()]);
    }

    #[test]
    fn samples_give_the_score_again_for_their_filter_only() {
        let text = [
            json!({"doc_id": 0, "filter": "last-number", "exact_match": 1.0}),
            json!({"doc_id": 1, "filter": "last-number", "exact_match": 0.0}),
            json!({"doc_id": 2, "filter": "last-number", "exact_match": true}),
            json!({"doc_id": 0, "filter": "other", "exact_match": 0.0}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
        let (v, n) = score_from_samples(&text, "exact_match,last-number").unwrap();
        assert_eq!((v, n), (2.0 / 3.0, 3));
        let e = |t: &str, key: &str| score_from_samples(t, key).unwrap_err().to_string();
        assert_eq!(e(&text, "exact_match,none"), "no sample of filter `none`");
        assert_eq!(e(&text, "exact_match"), "`exact_match` names no filter");
        assert!(e("{\"filter\": \"f\", \"m\": \"x\"}", "m,f").contains("not a number"));
        assert!(e("not json", "m,f").starts_with("line 1: not JSON"));
        // The line at fault is data, not only words: the blank line is counted.
        assert!(matches!(
            score_from_samples("\n{\"filter\": \"f\", \"m\": \"x\"}", "m,f"),
            Err(SamplesError::NotANumber { line: 2, .. })
        ));
        assert!(matches!(score_from_samples(&text, "exact_match,none"), Err(SamplesError::NoSample { .. })));
    }
}
