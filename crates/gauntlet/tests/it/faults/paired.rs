//! `gauntlet bench --paired-with`: two fake servers up at once, asked in ABBA order with the same prompt per pair
//! (their request log shows it), a slower decode called a regression with its MDE, an unchanged twin not.

use super::*;

/// Two spawned fake profiles `a` and `b` paced at `a_ms` and `b_ms` per word, logging their requests into
/// `requests.log`, with a corpus of distinct prompts; returns the manifest.
fn two_profiles(f: &Fixture, a_ms: u64, b_ms: u64, extra_b: &str) -> PathBuf {
    f.write();
    let root = f.path();
    let corpus: String = (0..30).map(|i| format!("{{\"prompt\": \"Count to p{i}.\"}}\n")).collect();
    std::fs::write(root.join("corpus.jsonl"), corpus).unwrap();
    let log = root.join("requests.log");
    let _ = std::fs::remove_file(&log);
    let mut profiles = String::new();
    for (name, ms) in [("a", a_ms), ("b", b_ms)] {
        let answers = root.join(format!("answers-{name}.json"));
        let text = serde_json::json!({"__token_delay_ms": ms.to_string(), "": answer("word")});
        std::fs::write(&answers, text.to_string()).unwrap();
        let args = [
            "--answers",
            answers.to_str().unwrap(),
            "--tag",
            &format!("{}-{name}", f.tag),
            "--request-log",
            log.to_str().unwrap(),
            "--lifetime-s",
            "120",
        ];
        let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        profiles.push_str(&format!(
            "[profiles.{name}]\nmodel = \"tiny\"\nserver = \"fake\"\nport = {port}\nsuite = \"suite.toml\"\n\
             server_arguments = [{args}]\nload_timeout = \"10s\"\nrequest_timeout = \"5s\"\nstop_grace = \"2s\"\n\
             metrics = \"/metrics\"\n\
             [profiles.{name}.bench]\nmax_tokens = 40\nwarmups = 1\nprompts = \"corpus.jsonl\"\n{extra}\n",
            port = free_port(),
            args = args.join(", "),
            extra = if name == "b" { extra_b } else { "" },
        ));
    }
    let manifest = format!(
        "version = 1\n[models.tiny]\npath = \"models/tiny.gguf\"\n[servers.fake]\nbinary = \"bin/fake-server\"\n{profiles}"
    );
    let path = root.join("paired.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

fn paired(f: &Fixture, manifest: &Path, out: &str, pairs: &str) -> (Option<i32>, String, serde_json::Value) {
    let out = f.path().join(out);
    let args = [
        "bench",
        "--manifest",
        manifest.to_str().unwrap(),
        "--profile",
        "b",
        "--paired-with",
        "a",
        "--pairs",
        pairs,
        "--out",
        out.to_str().unwrap(),
    ];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let record = std::fs::read_to_string(out.join("paired.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no paired.json\n{text}"));
    (o.status.code(), text, record)
}

fn call<'a>(record: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    record["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == metric).unwrap_or(&serde_json::Value::Null)
}

#[test]
fn paired_bench_asks_in_abba_order_and_calls_a_slower_decode_a_regression() {
    let f = Fixture::new("paired-slow");
    let manifest = two_profiles(&f, 2, 4, "");
    // 20 pairs: a call is made on ABBA blocks, and four blocks (8 pairs) all one way are p = 2/16; ten are
    // p = 2/1024, below the last look's level.
    let (code, text, record) = paired(&f, &manifest, "slow", "20");
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(record["paired_version"], gauntlet_schema::paired::PAIRED_VERSION);
    assert_eq!(record["verdict"], "regression", "{text}");
    // Looks at 8, 12, 16 and 20 pairs with decode and E2EL deciding: 6 of 1024 (exact, below 1 %).
    assert_eq!(record["false_call_bound"].as_f64(), Some(6.0 / 1024.0), "{record}");
    assert!(text.contains("false calls: with 4 looks (8, 12, 16, 20 pairs) and 2 deciding metrics, an unchanged twin has a deciding metric called a regression at most 0.59 % of the time"), "{text}");
    // Each side's server counted its own requests between the scrapes: at least one warm-up and one per pair (a
    // fresh connection is warmed with a request of its own), and the same on both sides: equal work.
    let finished: Vec<f64> = ["a", "b"]
        .iter()
        .map(|side| {
            let sessions = record[side]["server_metrics"].as_array().unwrap_or_else(|| panic!("{side}: {record}"));
            assert_eq!(sessions.len(), 1, "one session each when both are up");
            let key = sessions[0]["key"].as_array().unwrap();
            let k = key.iter().find(|k| k["name"] == "requests_finished").unwrap_or_else(|| panic!("{key:?}"));
            k["delta"].as_f64().unwrap()
        })
        .collect();
    assert!(finished[0] >= 21.0 && finished[0] == finished[1], "{finished:?}");
    let md = std::fs::read_to_string(f.path().join("slow/paired.md")).unwrap();
    assert!(md.contains("A's session 1") && md.contains("requests finished"), "{md}");
    assert_eq!(record["mode"], "both");
    assert_eq!(record["pairs"].as_array().unwrap().len(), 20, "{text}");
    let decode = call(&record, "decode_tokens_per_second");
    assert_eq!(decode["call"], "regression", "{decode}");
    assert!(decode["median_change"].as_f64().unwrap() < -0.3, "{decode}");
    assert!(decode["mde"].as_f64().is_some_and(|m| m > 0.0), "{decode}");
    assert!(text.contains("decode_tokens_per_second:") && text.contains("MDE"), "{text}");
    assert_eq!(record["equal_work"]["ignore_eos"], true);
    // The servers' own log: after one warm-up each, pair i's prompt to both, A first in even pairs, B first in odd.
    let log = std::fs::read_to_string(f.path().join("requests.log")).unwrap();
    let asked: Vec<(String, String)> = log
        .lines()
        .filter(|l| l.contains("Count to p"))
        .map(|l| {
            let (tag, prompt) = l.split_once(' ').unwrap();
            (tag.rsplit('-').next().unwrap().to_owned(), prompt.to_owned())
        })
        .collect();
    let mut want = vec![("a".to_owned(), "Count to p0.".to_owned()), ("b".into(), "Count to p0.".into())];
    for i in 1..=20 {
        let order = if i % 2 == 1 { ["a", "b"] } else { ["b", "a"] };
        want.extend(order.iter().map(|m| ((*m).to_owned(), format!("Count to p{i}."))));
    }
    assert_eq!(asked, want, "{log}");
    let md = std::fs::read_to_string(f.path().join("slow/paired.md")).unwrap();
    assert!(md.contains("| decode_tokens_per_second | yes |") && md.contains("| regression |"), "{md}");
}

#[test]
fn paired_bench_of_an_unchanged_twin_calls_no_regression_and_stops_at_a_look() {
    let f = Fixture::new("paired-twin");
    let manifest = two_profiles(&f, 3, 3, "");
    let (code, text, record) = paired(&f, &manifest, "twin", "12");
    assert_ne!(code, Some(1), "{text}");
    let metrics = record["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 4, "{text}");
    for m in metrics {
        assert_ne!(m["call"], "regression", "{m}");
        assert!(m["mde"].as_f64().is_some(), "every call states its MDE: {m}");
    }
    // Looks at 8 and 12 pairs only, each at 0.05 / 2, that level shared by the two deciding metrics (Holm): the
    // smallest p tested at 0.025 / 2; the two reported metrics at the look's whole level.
    assert_eq!(record["looks"], serde_json::json!([8, 12]));
    let n = record["pairs"].as_array().unwrap().len();
    assert!(n == 8 || n == 12, "stops only at a look: {n}\n{text}");
    let level = |m: &serde_json::Value| m["alpha"].as_f64().unwrap();
    let (deciding, reported): (Vec<&serde_json::Value>, _) = metrics.iter().partition(|m| m["deciding"] == true);
    let mut levels: Vec<f64> = deciding.iter().map(|m| level(m)).collect();
    levels.sort_by(f64::total_cmp);
    assert_eq!(levels.len(), 2, "{text}");
    assert!((levels[0] - 0.025 / 2.0).abs() < 1e-12, "{levels:?}");
    assert!(levels.iter().all(|l| [2.0, 1.0].iter().any(|k| (l - 0.025 / k).abs() < 1e-12)), "{levels:?}");
    assert!(reported.iter().all(|m| (level(m) - 0.025).abs() < 1e-12), "{reported:?}");
    for m in metrics {
        assert_eq!(m["blocks"].as_u64(), Some(n as u64 / 2), "{m}");
    }
}

#[test]
fn paired_bench_alternates_servers_when_the_manifest_says_they_cannot_share() {
    let f = Fixture::new("paired-alternate");
    let manifest = two_profiles(&f, 2, 4, "paired = \"alternate\"");
    let (code, text, record) = paired(&f, &manifest, "alt", "3");
    assert_eq!(record["mode"], "alternate", "{text}");
    // ABBA: A | B B | A A | B: each server started at every switch (A twice, B twice for three pairs).
    assert_eq!((record["a"]["starts"].as_u64(), record["b"]["starts"].as_u64()), (Some(2), Some(2)), "{text}");
    assert_eq!(record["pairs"].as_array().unwrap().len(), 3);
    // Three pairs cannot reach significance: inconclusive, exit 4, never a confident call.
    assert_eq!(code, Some(4), "{text}");
    // Never both up at once: a port conflict would have failed a load; the log holds each server's requests.
    assert!(record["problems"].as_array().unwrap().is_empty(), "{text}");
}

/// A member's server that dies mid-bench fails it (exit 1), and the record says so with the problem's code beside
/// its words: scripts match `server-died`, not the sentence.
#[test]
fn paired_bench_whose_member_dies_fails_with_the_problem_coded() {
    let f = Fixture::new("paired-death");
    let manifest = two_profiles(&f, 1, 1, "");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let b = format!("\"{}-b\", ", f.tag);
    assert!(text.contains(&b), "{text}");
    std::fs::write(
        &manifest,
        text.replace(&b, &format!("{b}\"--fault\", \"crash-after\", \"--crash-after\", \"6\", ")),
    )
    .unwrap();
    let (code, text, record) = paired(&f, &manifest, "death", "10");
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(record["verdict"], "fail", "{text}");
    let problems = record["problems"].as_array().unwrap();
    let died = problems.iter().find(|p| p["code"] == "server-died").unwrap_or_else(|| panic!("{problems:?}\n{text}"));
    assert!(died["text"].as_str().unwrap().starts_with("B (`b`): the server died at pair "), "{died}");
    assert!(text.contains("problem: B (`b`): the server died at pair"), "{text}");
}

/// The delaying proxy in front of one fake server: a profile through the proxy adding 2 ms to every streamed word of
/// a 4 ms server (+50 %) is a decode regression against one through a zero-delay proxy; a twin through another
/// zero-delay proxy is not. (The proxy's own hop is not free: against the server direct, even a zero-delay proxy
/// costs TTFT, so both sides of a comparison go through one.)
#[test]
fn paired_bench_through_the_delaying_proxy_sees_its_slowdown_and_not_the_proxy_itself() {
    let f = Fixture::new("paired-proxy");
    f.write();
    let answers = f.path().join("answers-paced.json");
    let text = serde_json::json!({"__token_delay_ms": "4", "": answer("word")});
    std::fs::write(&answers, text.to_string()).unwrap();
    let (server, port) = start_fake(&f, &["--answers", answers.to_str().unwrap()]);
    let upstream = format!("http://127.0.0.1:{port}");
    let (slow_proxy, slow) = start_fake(&f, &["--proxy-to", &upstream, "--event-delay-us", "2000"]);
    let (twin_proxy, twin) = start_fake(&f, &["--proxy-to", &upstream, "--event-delay-us", "0"]);
    let (base_proxy, base) = start_fake(&f, &["--proxy-to", &upstream, "--event-delay-us", "0"]);
    let manifest = attach_manifest(&f, &[("base", base), ("slow", slow), ("twin", twin)], "");
    let run = |b: &str, out: &str| run_attached(&f, &manifest, b, "base", "20", out);
    let (code, text, record) = run("slow", "slow");
    let decode = call(&record, "decode_tokens_per_second");
    assert_eq!(decode["call"], "regression", "{text}");
    // 4 ms per word becomes 6: decode at 2/3 of the direct one at most (on a busy machine the server's own sleeps
    // stretch and the 2 ms are a smaller share of them).
    let change = decode["median_change"].as_f64().unwrap();
    assert!((-0.45..-0.05).contains(&change), "{decode}");
    assert_eq!(code, Some(1), "{text}");
    // Every word reached the client through the proxy, framed as events.
    let tokens = record["pairs"][0]["b"]["completion_tokens"].as_u64();
    let events = record["pairs"][0]["b"]["events"].as_array().unwrap().len();
    assert!(events >= 40, "{tokens:?} {events}");
    let (code, text, record) = run("twin", "twin");
    for m in record["metrics"].as_array().unwrap() {
        assert_ne!(m["call"], "regression", "{m}\n{text}");
    }
    assert_ne!(code, Some(1), "{text}");
    drop((server, slow_proxy, twin_proxy, base_proxy));
    assert_no_survivors(&f.tag);
}

/// A fake server (or proxy) of the fixture's tag with `args`, listening; returns it and its port.
fn start_fake(f: &Fixture, args: &[&str]) -> (Reaped, u16) {
    let port = free_port();
    let child = std::process::Command::new(workspace_bin("gauntlet-fake-server"))
        .args(["--port", &port.to_string(), "--tag", &f.tag, "--lifetime-s", "120"])
        .args(args)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let reaped = Reaped(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (reaped, port)
}

/// A manifest of attach profiles, one per `(name, port)`, each with `bench_extra` in its bench table.
fn attach_manifest(f: &Fixture, profiles: &[(&str, u16)], bench_extra: &str) -> PathBuf {
    f.write();
    let mut text = "version = 1\n".to_owned();
    for (name, p) in profiles {
        text.push_str(&format!(
            "[profiles.{name}]\nbase_url = \"http://127.0.0.1:{p}\"\nsuite = \"suite.toml\"\nload_timeout = \"10s\"\n\
             request_timeout = \"5s\"\n[profiles.{name}.bench]\nmax_tokens = 40\nwarmups = 1\n{bench_extra}\n"
        ));
    }
    let manifest = f.path().join("attach.toml");
    std::fs::write(&manifest, text).unwrap();
    manifest
}

fn run_attached(
    f: &Fixture,
    manifest: &Path,
    b: &str,
    a: &str,
    pairs: &str,
    out: &str,
) -> (Option<i32>, String, serde_json::Value) {
    let out = f.path().join(out);
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--profile", b, "--paired-with", a];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--pairs", pairs, "--out", out.to_str().unwrap()]);
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let record: serde_json::Value = std::fs::read_to_string(out.join("paired.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no paired.json\n{text}"));
    (o.status.code(), text, record)
}

fn period<'a>(record: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    let all = record["period_effects"].as_array().unwrap_or_else(|| panic!("no period effects: {record}"));
    all.iter().find(|m| m["metric"] == metric).unwrap_or(&serde_json::Value::Null)
}

/// The hop: an unchanged twin (two profiles of one paced fake server) behind one proxy that holds the
/// start of every other stream 40 ms and then bursts it, which in ABBA order is the first request of every pair.
/// Pair by pair that is a ±40 ms TTFT and a faster decode on alternate sides; per ABBA block it cancels. Decode is
/// decided "no change" within 20 pairs and the period effect is named with its size; through a proxy that holds
/// nothing, the twin passes, exit 0.
#[test]
fn paired_twin_behind_a_hop_that_holds_every_other_stream_is_no_change_with_the_period_effect_named() {
    let f = Fixture::new("paired-hop");
    f.write();
    let answers = f.path().join("answers-paced.json");
    // Steady pace: on this shared machine a word-by-word sleep stretches with the load, which is noise of the
    // machine and not the hop's.
    let text = serde_json::json!({"__token_delay_ms": "8", "__steady_pace": "1", "": answer("word")});
    std::fs::write(&answers, text.to_string()).unwrap();
    let (server, port) = start_fake(&f, &["--answers", answers.to_str().unwrap()]);
    let upstream = format!("http://127.0.0.1:{port}");
    let (hop, hop_port) = start_fake(&f, &["--proxy-to", &upstream, "--hold-first-ms", "40"]);
    let (plain, plain_port) = start_fake(&f, &["--proxy-to", &upstream]);
    let manifest = attach_manifest(&f, &[("a", hop_port), ("b", hop_port), ("pa", plain_port), ("pb", plain_port)], "");
    let (code, text, record) = run_attached(&f, &manifest, "b", "a", "20", "hop");
    eprintln!("{text}");
    assert_eq!(record["paired_version"], gauntlet_schema::paired::PAIRED_VERSION);
    assert_eq!(record["deciding"], serde_json::json!(["decode_tokens_per_second", "e2el"]), "{text}");
    let decode = call(&record, "decode_tokens_per_second");
    assert_eq!(decode["call"], "no-change", "{text}");
    assert!(record["pairs"].as_array().unwrap().len() <= 20);
    // The hop is in every pair's ratio and not in the blocks' means.
    let (pair_sd, block_sd) = (decode["pair_sd"].as_f64().unwrap(), decode["block_sd"].as_f64().unwrap());
    eprintln!("decode log ratios: sd {pair_sd:.4} per pair, {block_sd:.4} per block");
    assert!(pair_sd > 3.0 * block_sd, "pair sd {pair_sd}, block sd {block_sd}\n{text}");
    // Named with its size: the first request of each pair about 40 ms later to its first token, whichever member.
    let ttft = period(&record, "ttft");
    let held = ttft["difference"].as_f64().unwrap();
    assert!(ttft["large"] == true && (0.030..0.060).contains(&held), "{ttft}\n{text}");
    let sentence = ttft["sentence"].as_str().unwrap();
    assert!(sentence.contains("ms slower to its first token"), "{sentence}");
    assert!(text.contains("period effect: ttft") && text.contains("buffering hop"), "{text}");
    let decode_period = period(&record, "decode_tokens_per_second");
    assert!(decode_period["change"].as_f64().unwrap() > 0.05, "the burst decodes faster: {decode_period}");
    let md = std::fs::read_to_string(f.path().join("hop/paired.md")).unwrap();
    assert!(md.contains("Period effect") && md.contains("| decode_tokens_per_second | yes |"), "{md}");
    assert_ne!(code, Some(1), "{text}");
    // Without the hop: every deciding metric "no change", PASS, exit 0; TTFT reported and not deciding.
    let (code, text, record) = run_attached(&f, &manifest, "pb", "pa", "20", "plain");
    eprintln!("{text}");
    assert_eq!(record["verdict"], "pass", "{text}");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(call(&record, "ttft")["deciding"], false, "{text}");
    assert!(period(&record, "ttft")["large"] == false, "{text}");
    drop((server, hop, plain));
    assert_no_survivors(&f.tag);
}

/// Item 4 of #30: decode on the servers' own clocks. An unchanged twin (two profiles of one fake server paced at
/// 3 ms a word, its `timings` within ±1 % of that pace) whose streams stall after their first word for 0 to 200 ms
/// outside the server (a busy client, a hop): on the servers' clocks decode is decided "no change" and the bench,
/// deciding on decode alone, passes (exit 0), with the clock named in the record, the terminal and paired.md. The
/// same twin on a server that sends no timings is judged on the client's clock, named with its reason, where the
/// stalls leave decode undecided.
#[test]
fn paired_twin_with_a_noisy_client_side_decides_decode_on_the_servers_clock_and_not_on_the_clients() {
    let f = Fixture::new("paired-clock");
    f.write();
    let paced = |name: &str, timings: &str| {
        let answers = f.path().join(format!("answers-{name}.json"));
        let text = serde_json::json!({"__token_delay_ms": "3", "__steady_pace": "1", "__server_timings": timings,
            "__client_noise_ms": "200", "": answer("word")});
        std::fs::write(&answers, text.to_string()).unwrap();
        start_fake(&f, &["--answers", answers.to_str().unwrap()])
    };
    let (timed, timed_port) = paced("timed", "1");
    let (untimed, untimed_port) = paced("untimed", "0");
    let profiles = [("a", timed_port), ("b", timed_port), ("ca", untimed_port), ("cb", untimed_port)];
    let manifest = attach_manifest(&f, &profiles, "decide = [\"decode\"]");
    let (code, text, record) = run_attached(&f, &manifest, "b", "a", "20", "server");
    assert_eq!(record["paired_version"], gauntlet_schema::paired::PAIRED_VERSION);
    assert_eq!(record["decode_clock"], "server clock (llama.cpp timings)", "{text}");
    let decode = call(&record, "decode_tokens_per_second");
    assert_eq!(decode["call"], "no-change", "{text}");
    // Each pair keeps both clocks' rates: the server's within ±2 % of each other, the client's far apart.
    let pair = &record["pairs"][0]["values"];
    let [sa, sb] = [0, 1].map(|i| pair["server_decode_tokens_per_second"][i].as_f64().unwrap());
    assert!((sb / sa - 1.0).abs() < 0.03 && (320.0..345.0).contains(&sa), "{pair}");
    assert!(pair["decode_tokens_per_second"].is_array(), "{pair}");
    assert_eq!((record["verdict"].as_str(), code), (Some("pass"), Some(0)), "{text}");
    assert!(text.contains("decode: server clock (llama.cpp timings)"), "{text}");
    let md = std::fs::read_to_string(f.path().join("server/paired.md")).unwrap();
    assert!(md.contains("Decode: server clock (llama.cpp timings)."), "{md}");
    // No timings from the server: the client's clock, which the stalls leave undecided.
    let (code, text, record) = run_attached(&f, &manifest, "cb", "ca", "20", "client");
    let clock = record["decode_clock"].as_str().unwrap_or_default();
    assert!(clock.starts_with("client clock (not every request"), "{clock}\n{text}");
    let decode = call(&record, "decode_tokens_per_second");
    assert_ne!(decode["call"], "no-change", "{text}");
    assert!(record["pairs"][0]["values"].get("server_decode_tokens_per_second").is_none(), "{text}");
    assert_eq!(code, Some(4), "inconclusive: {text}");
    drop((timed, untimed));
    assert_no_survivors(&f.tag);
}

/// When only one member's server reports its decode rate, the pairs keep the client's clock (comparing one
/// server's own account with another's client-side time would compare two different things), and say so.
#[test]
fn paired_bench_falls_back_to_the_clients_clock_when_one_side_lacks_server_timings() {
    let f = Fixture::new("paired-half-timed");
    f.write();
    let mut ports = Vec::new();
    let mut servers = Vec::new();
    for (name, timings) in [("timed", "1"), ("untimed", "0")] {
        let answers = f.path().join(format!("answers-{name}.json"));
        let text = serde_json::json!({"__token_delay_ms": "3", "__steady_pace": "1", "__server_timings": timings,
            "": answer("word")});
        std::fs::write(&answers, text.to_string()).unwrap();
        let (s, p) = start_fake(&f, &["--answers", answers.to_str().unwrap()]);
        servers.push(s);
        ports.push(p);
    }
    let manifest = attach_manifest(&f, &[("a", ports[0]), ("b", ports[1])], "");
    let (_, text, record) = run_attached(&f, &manifest, "b", "a", "8", "half");
    assert_eq!(record["decode_clock"], "client clock (not every request carried the server's own decode rate)");
    // A's requests carry the timings and B's do not; no pair has a server-clock value.
    assert!(record["pairs"][0]["a"]["timings"]["predicted_per_second"].as_f64().is_some(), "{text}");
    assert!(record["pairs"][0]["b"].get("timings").is_none(), "{text}");
    assert!(
        record["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["values"].get("server_decode_tokens_per_second").is_none())
    );
    assert!(text.contains("decode: client clock"), "{text}");
    drop(servers);
    assert_no_survivors(&f.tag);
}
