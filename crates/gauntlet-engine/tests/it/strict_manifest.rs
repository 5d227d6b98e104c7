//! Strict manifests (issue 16 item 7 and the hardening issue): an unknown key is an error with a suggestion, and
//! nothing that could reach a command line, a request or a path passes with a control character, an impossible
//! port or host, or an unbounded size.

use std::path::Path;
use std::time::{Duration, Instant};

use gauntlet_engine::manifest::{MAX_FILE_BYTES, Manifest};

const ROOT: &str = "/nonexistent/gauntlet-root";

fn problems(text: &str) -> Vec<String> {
    match Manifest::parse(text, "test.toml", Path::new(ROOT)) {
        Ok(_) => panic!("expected the manifest to be refused:\n{text}"),
        Err(e) => e.problems,
    }
}

fn attach(extra: &str) -> String {
    format!("version = 1\n[profiles.p]\nbase_url = \"http://127.0.0.1:8000\"\n{extra}\n")
}

fn spawn(extra: &str) -> String {
    format!(
        "version = 1\n[models.m]\npath = \"m.gguf\"\n[servers.s]\nbinary = \"bin/server\"\n\
         [profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\n{extra}\n"
    )
}

#[test]
fn a_misspelt_key_in_the_default_manifest_is_an_error_naming_the_right_key() {
    let text = Manifest::embedded_default_text();
    assert!(text.contains("request_timeout"), "the default sets request_timeout");
    let bad = text.replacen("request_timeout", "request_timout", 1);
    let problems = problems(&bad);
    assert!(
        problems.iter().any(|p| p.contains(".request_timout: unknown key; did you mean `request_timeout`?")),
        "{problems:?}"
    );
    // Case and separators: `Base-URL` is `base_url`.
    let problems = self::problems("version = 1\n[profiles.p]\nbase_url = \"http://x:1\"\nLoad-Timeout = \"1s\"\n");
    assert_eq!(problems, vec!["profiles.p.Load-Timeout: unknown key; did you mean `load_timeout`?"]);
}

#[test]
fn a_key_the_profile_reads_is_known() {
    // `features` is read by every profile; it must not be refused as unknown.
    let text = "version = 1\n[models.m]\npath = \"m.gguf\"\n[servers.s]\nbinary = \"bin/server\"\n\
         [features.spec]\nflags = [\"--draft\"]\n[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\n\
         features = [\"spec\"]\nserver_arguments = [\"--draft\", \"4\"]\n";
    Manifest::parse(text, "test.toml", Path::new(ROOT)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn impossible_ports_are_refused_wherever_a_port_appears() {
    for url in ["http://127.0.0.1:99999", "http://localhost:0", "http://h:65536/v1", "http://[::1]:99999", "http://h:"]
    {
        let p = problems(&attach("").replace("http://127.0.0.1:8000", url));
        assert!(p.iter().any(|p| p.starts_with("profiles.p.base_url:") && p.contains("port")), "{url}: {p:?}");
    }
    let p = problems(&spawn("").replace("port = 8080", "port = 99999"));
    assert!(p.iter().any(|p| p.contains("profiles.p.port: 99999 is out of range")), "{p:?}");
    // Good addresses still pass.
    for url in ["http://127.0.0.1:8000", "http://[::1]:8000/", "http://my-host.example:1/serving", "http://svc_a"] {
        Manifest::parse(&attach("").replace("http://127.0.0.1:8000", url), "t", Path::new(ROOT))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    }
}

#[test]
fn invalid_hosts_in_base_url_are_refused() {
    for url in [
        "http://exämple.com:8000",
        "http://exa mple:8000",
        "http://-bad:8000",
        "http://a..b:8000",
        "http://[::zz]:8000",
        "http://999.1.1.1:8000",
        "http://:8000",
        "http://user:secret@host:8000",
        "http://host:8000/?q=1",
    ] {
        let p = problems(&attach("").replace("http://127.0.0.1:8000", url));
        assert!(p.iter().any(|p| p.starts_with("profiles.p.base_url:")), "{url}: {p:?}");
    }
}

#[test]
fn control_characters_are_refused_in_every_string() {
    let cases = [
        attach("").replace(":8000", ":8000\\r\\nX-Injected: 1"),
        attach("").replace(":8000", ":8000\\n"),
        attach("health_path = \"/health\\r\\nHost: evil\""),
        attach("request_model = \"m\\u0000\""),
        spawn("server_arguments = [\"--threads\", \"4\\n--evil\"]"),
        spawn("environment = { A = \"x\\u0000y\" }"),
        spawn("runner = [\"self-hosted\\t\"]"),
        attach("[profiles.p.bench]\nprompts = \"p\\njsonl\""),
        format!("{}\n[plan]\nshared = [\"src/\\u0000\"]\n", attach("")),
        "version = 1\nroot = \"a\\nb\"\n[profiles.p]\nbase_url = \"http://127.0.0.1:8000\"\n".to_owned(),
    ];
    for text in cases {
        let p = problems(&text);
        assert!(p.iter().any(|p| p.contains("U+00")), "{text}\n{p:?}");
    }
}

#[test]
fn an_environment_name_cannot_carry_another_variable() {
    let p = problems(&spawn("environment = { \"A=B\" = \"x\" }"));
    assert!(p.iter().any(|p| p.starts_with("profiles.p.environment.A=B: an environment variable name")), "{p:?}");
}

#[test]
fn a_profile_name_cannot_lead_out_of_the_output_folder() {
    let p = problems("version = 1\n[profiles.\"../x\"]\nbase_url = \"http://127.0.0.1:8000\"\n");
    assert!(p.iter().any(|p| p.starts_with("profiles.../x: a profile name")), "{p:?}");
}

#[test]
fn an_oversized_manifest_is_refused_before_parsing_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        f.write_all(attach("").as_bytes()).unwrap();
        let line = format!("# {}\n", "x".repeat(1021));
        for _ in 0..70 * 1024 {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    assert!(std::fs::metadata(&path).unwrap().len() >= 70 << 20);
    let started = Instant::now();
    let err = Manifest::from_file(&path).unwrap_err().to_string();
    let took = started.elapsed();
    assert!(err.contains(&format!("larger than the {} KiB limit", MAX_FILE_BYTES / 1024)), "{err}");
    assert!(took < Duration::from_secs(1), "refusing a 70 MB manifest took {took:?}");
    // Just under the cap it is read and parsed.
    let ok = dir.path().join("ok.toml");
    let mut text = attach("");
    text.push_str(&"#".repeat(MAX_FILE_BYTES as usize - text.len()));
    std::fs::write(&ok, &text).unwrap();
    Manifest::from_file(&ok).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_unknown_key_in_a_suite_file_is_an_error_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("suite.toml"),
        "id = \"s\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_toknes = 8\nmessages = [{ role = \"user\", content = \"hi\" }]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("m.toml"), attach("suite = \"suite.toml\"")).unwrap();
    let err = Manifest::from_file(&dir.path().join("m.toml")).unwrap_err().to_string();
    assert!(err.contains("cases[0].max_toknes: unknown key; did you mean `max_tokens`?"), "{err}");
}
