//! lm-eval's results and samples readers (`qualify::r2_lm_eval`): what R2 and `verify` take a score from, in a
//! bundle someone else produced. The task names are untrusted too (a bundle's snapshot names them): each is checked
//! as the name of a samples file.
//!
//! Input: the multi-file format of `gauntlet_fuzz::sections`: `@@ results` (lm-eval's results JSON), `@@ samples`
//! (one task's JSONL samples), `@@ tasks` (task names, one a line) and `@@ metric` (the results key, e.g.
//! `acc,none`); any may be missing.
#![no_main]

use gauntlet_engine::manifest::LmEval;
use gauntlet_engine::qualify::r2_lm_eval::{lm_eval_verdict, samples_file, score_from_samples, scores};
use gauntlet_fuzz::sections;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let files = sections(data, 1);
    let get = |name: &str| files.iter().rev().find(|(n, _)| n == name).map(|(_, b)| *b);
    let text = |name: &str| get(name).and_then(|b| std::str::from_utf8(b).ok());
    let metric = text("metric").map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
    let tasks: Vec<String> = match text("tasks") {
        Some(t) => t.lines().take(16).map(str::to_owned).collect(),
        None => vec!["t".to_owned()],
    };
    for t in &tasks {
        if let Some(name) = samples_file(t) {
            assert!(!name.contains('/') && !name.contains(".."), "task `{t}` names `{name}`");
        }
    }
    let lm = LmEval { tasks, limit: None, include_path: None, metric: metric.clone() };
    if let Some(results) = get("results")
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(results)
    {
        let scored = scores(&value, &lm);
        let (score, _) = lm_eval_verdict(true, &scored, 0.5);
        assert!(!score.is_nan(), "a NaN score from {value}");
    }
    if let Some(samples) = text("samples") {
        if let Ok((mean, n)) = score_from_samples(samples, metric.as_deref().unwrap_or("acc,none")) {
            assert!(n > 0, "a mean of no samples: {mean}");
        }
    }
});
