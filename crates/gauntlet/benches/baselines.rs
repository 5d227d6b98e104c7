//! `cargo bench -p gauntlet --bench baselines`: what baselines cost a team.
//!
//! - a skip-cache hit, as a user sees it: the whole `gauntlet run --source DIR` process, from spawn to exit, with
//!   the source tree being this repository;
//! - `baseline verify` on one identity's history of 10,000 promotions (each naming its own record), in process and
//!   as the `gauntlet baseline verify` command;
//! - one more promotion onto that history.
//!
//! Prints min / median / p90 / max of each; nothing is asserted about speed (numbers go in the issue notes), but a
//! hit that is not a hit, or a store that does not verify, aborts the benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gauntlet_engine::identity::{self, canonical};
use gauntlet_engine::manifest::Manifest;
use gauntlet_engine::store::skip_cache::{self, CacheKey};
use gauntlet_engine::store::{HistoryEntry, Provenance, Store};
use gauntlet_engine::util::sha256_hex;
use gauntlet_schema::RunRecord;
use serde_json::json;

const HISTORY: usize = 10_000;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    cache_hit(dir.path());
    verify_history(dir.path());
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<44} n={:<3} min {:>8.2} ms  median {:>8.2} ms  p90 {:>8.2} ms  max {:>8.2} ms",
        samples.len(),
        ms(samples[0]),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(samples[samples.len() - 1])
    );
}

/// A passing run record of the given identity; `n` makes each one distinct (as each promotion's run is).
fn record(identity: &serde_json::Value, n: usize) -> RunRecord {
    let case = |id: &str| {
        json!({
            "id": id, "status": "pass", "stream": false, "request": {"model": "m", "max_tokens": 64},
            "answer": {"content": "The capital of France is Paris.", "usage": {"prompt_tokens": 30, "completion_tokens": 9}},
            "seconds": 0.21, "observed": "The capital of France is Paris.",
            "checks": [{"check": "contains", "passed": true}]
        })
    };
    serde_json::from_value(json!({
        "schema_version": 2, "gauntlet_version": env!("CARGO_PKG_VERSION"), "profile": "default",
        "started_at": format!("2026-12-01T08:00:{:02}.{:06}Z", n / 1_000_000 % 60, n % 1_000_000),
        "finished_at": "2026-12-01T08:00:33.000Z", "wall_seconds": 33.0,
        "identity": identity, "identity_digest": identity::digest(identity),
        "environment": {"hostname": "bench", "os": "linux", "arch": "x86_64", "cpu_model": "x", "cpu_count": 2},
        "server": {"mode": "spawned", "base_url": "http://127.0.0.1:18480", "load_seconds": 0.9, "loaded": true, "stop": "terminated"},
        "suite": {"id": "default", "version": 1, "digest": "d", "budget_seconds": 300.0, "request_timeout_seconds": 60.0, "over_budget": false},
        "cases": (0..16).map(|i| case(&format!("case-{i}"))).collect::<Vec<_>>(),
        "decode": {"median_tokens_per_second": 100.0, "token_source": "usage", "cases_counted": 12},
        "findings": [], "verdict": "pass",
        "thresholds": {"min_pass_rate": 0.4, "fail_regressions": 2, "decode_ratio_warn": 0.85, "load_ratio_warn": 1.5,
                       "load_timeout_seconds": 120.0, "request_timeout_seconds": 60.0, "suite_budget_seconds": 300.0}
    }))
    .expect("bench record")
}

fn sample_identity() -> serde_json::Value {
    json!({
        "recipe": {"model": {"sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
                   "server": "xllamacpp", "server_arguments": ["-c", "4096", "-np", "1"]},
        "binding": {"device": "cpu"}, "suite": {"id": "default", "version": 1}
    })
}

/// The full process of a hit: manifest load, identity, store lookup, source tree hash, cache read, report print.
fn cache_hit(dir: &Path) {
    let home = dir.join("home");
    let store = dir.join("store");
    let manifest_path = dir.join("gauntlet.toml");
    std::fs::write(&manifest_path, "version = 1\n[profiles.attached]\nbase_url = \"http://127.0.0.1:9\"\n").unwrap();
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = Manifest::from_file(&manifest_path).expect("bench manifest");
    let profile = manifest.select(None).expect("profile");
    let identity = gauntlet_engine::session::compute_identity(profile, &home).expect("identity");
    let key = CacheKey::for_run(profile, &identity, &source, "none").expect("this repository is a git work tree");
    let remembered = record(&sample_identity(), 0);
    skip_cache::remember(&home.join("skip-cache"), &key, &remembered, "# gauntlet attached: PASS\n").expect("remember");

    let run = || {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gauntlet"))
            .args(["run", "--manifest", manifest_path.to_str().unwrap(), "--source", source.to_str().unwrap()])
            .env("GAUNTLET_HOME", &home)
            .env("GAUNTLET_STORE", &store)
            .output()
            .expect("spawn gauntlet");
        let took = start.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("reused the pass"),
            "not a cache hit: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    for _ in 0..3 {
        run();
    }
    let files = Command::new("git").arg("-C").arg(&source).args(["ls-files"]).output().unwrap().stdout;
    let name = format!("skip-cache hit, whole process ({} files)", files.split(|b| *b == b'\n').count() - 1);
    summary(&name, (0..30).map(|_| run()).collect());
}

/// Writes one identity's history of `HISTORY` promotions directly (the chain is exactly what `promote` writes,
/// but promoting 10,000 times would rewrite the file 10,000 times).
fn generate_history(store_dir: &Path) -> Store {
    let store = Store::open(store_dir).expect("store");
    let identity = sample_identity();
    let key = identity::digest(&identity);
    let mut lines = String::new();
    let mut prev: Option<String> = None;
    for n in 0..HISTORY {
        let bytes = serde_json::to_vec_pretty(&record(&identity, n)).unwrap();
        let digest = sha256_hex(&bytes);
        std::fs::write(store_dir.join("records").join(format!("{digest}.json")), &bytes).unwrap();
        let mut entry = HistoryEntry {
            seq: n as u64 + 1,
            prev: prev.clone(),
            kind: None,
            identity_digest: key.clone(),
            recipe_digest: identity::recipe_digest(&gauntlet_schema::IdentityRecord::from_value(identity.clone())),
            record: digest,
            profile: "default".into(),
            verdict: "pass".into(),
            provenance: Provenance {
                event: "push".into(),
                repository: Some("acme/engine".into()),
                git_ref: Some("refs/heads/main".into()),
                commit: Some(format!("{n:040x}")),
                actor: Some("ci".into()),
                run_url: None,
            },
            note: format!("nightly {n}"),
            promoted_at: "2026-12-01T08:00:00Z".into(),
            digest: String::new(),
        };
        entry.digest = gauntlet_engine::store::entry_digest(&entry);
        prev = Some(entry.digest.clone());
        lines.push_str(&canonical(&serde_json::to_value(&entry).unwrap()));
        lines.push('\n');
    }
    std::fs::write(store_dir.join("history").join(format!("{key}.jsonl")), lines).unwrap();
    store
}

fn verify_history(dir: &Path) {
    let store_dir = dir.join("big-store");
    let start = Instant::now();
    let store = generate_history(&store_dir);
    println!("generated {HISTORY} promotions in {:.1} s", start.elapsed().as_secs_f64());
    let record_bytes: u64 = std::fs::read_dir(store_dir.join("records"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    println!("records: {:.1} MiB in all", record_bytes as f64 / (1 << 20) as f64);

    let verify = || {
        let start = Instant::now();
        let (entries, problems) = store.verify().expect("verify");
        assert_eq!((entries, problems.len()), (HISTORY, 0), "{problems:?}");
        start.elapsed()
    };
    summary(&format!("baseline verify, {HISTORY} entries, in process"), (0..5).map(|_| verify()).collect());
    let command = || {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gauntlet"))
            .args(["baseline", "verify", "--store", store_dir.to_str().unwrap()])
            .output()
            .expect("spawn gauntlet");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        start.elapsed()
    };
    summary(&format!("gauntlet baseline verify, {HISTORY} entries"), (0..5).map(|_| command()).collect());
    let identity = sample_identity();
    let mut n = HISTORY;
    let mut promote = || {
        n += 1;
        let r = record(&identity, n);
        let start = Instant::now();
        store.promote(&r, Provenance { event: "manual".into(), ..Provenance::default() }, "bench").expect("promote");
        start.elapsed()
    };
    summary(&format!("promote onto a {HISTORY}-entry history"), (0..5).map(|_| promote()).collect());
}
