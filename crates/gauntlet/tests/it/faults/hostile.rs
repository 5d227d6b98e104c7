//! A hostile server: it echoes the API key it was sent and answers with text meant for the terminal and for
//! GitHub's runner (workflow commands, escape sequences). The key must reach no file and no output line, and no
//! server text may become a workflow command.

use super::*;

/// Every file under `dir`, recursively, with its bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// The lines GitHub's runner would take as workflow commands: `::` at the start (after whitespace), or `##[`.
fn workflow_commands(text: &str) -> Vec<&str> {
    text.split(['\n', '\r']).filter(|l| l.trim_start().starts_with("::") || l.contains("##[")).collect()
}

#[test]
fn an_echoed_api_key_reaches_no_file_and_no_output_line() {
    const KEY: &str = "sk-gauntlet-LEAK-4f9a2c71e0";
    let f = Fixture::new("echo-key");
    let (mut server, manifest) = f.attached(&["--fault", "echo-auth"], "", "ECHO_KEY");
    let out = f.path().join("out");
    let summary = f.path().join("step-summary.md");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let env = [("ECHO_KEY", KEY), ("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())];
    let run = finish(gauntlet(&args, &env, Duration::from_secs(60)), &out);
    let _ = server.kill();
    let _ = server.wait();
    // The server did echo it: the answers quote a redacted key, and the failing case carries the 500 body.
    assert_eq!(run.case("beta")["status"], "error", "{}", run.explain());
    let alpha = run.case("alpha")["answer"]["content"].as_str().unwrap_or_default().to_owned();
    assert!(alpha.contains("(you sent Bearer [redacted])"), "{alpha}\n{}", run.explain());
    let gamma = &run.case("gamma")["answer"];
    assert!(gamma["timeline"].as_array().is_some_and(|t| t.len() > 10), "streamed in small pieces: {gamma}");
    for (path, bytes) in files_under(&out).into_iter().chain([(summary.clone(), std::fs::read(&summary).unwrap())]) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(KEY), "the key is written into {}:\n{text}", path.display());
        // A key split across stream events is not written piecewise either.
        assert!(!text.contains("4f9a2c71e0") && !text.contains("LEAK-"), "part of the key in {}", path.display());
    }
    for (name, stream) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(!stream.contains(KEY) && !stream.contains("LEAK-"), "the key is printed on {name}:\n{stream}");
        assert!(!stream.contains('\u{1b}'), "a server's escape sequence reached {name}:\n{stream}");
        for line in workflow_commands(stream) {
            assert!(
                line.starts_with("::error title=gauntlet remote ")
                    || line.starts_with("::warning title=gauntlet remote "),
                "server text became a workflow command on {name}: {line:?}\n{stream}"
            );
        }
    }
    assert!(run.stdout.contains("::error title=gauntlet remote request-error%3A beta::"), "{}", run.explain());
    assert!(run.stderr.contains("\\::add-mask::x"), "shown, defused: {}", run.explain());
    assert_no_survivors(&f.tag);
}

/// Item 4 at the command line: a record named by the user that is a FIFO or a device is refused at once (exit 2),
/// never waited on or read without end.
#[test]
fn records_named_on_the_command_line_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("run.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    unsafe extern "C" {
        fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
    // SAFETY: mkfifo on a valid NUL-terminated path.
    assert_eq!(unsafe { mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    for (args, want) in [
        (vec!["compare", fifo, fifo], "is a FIFO, not a regular file"),
        (vec!["compare", "/dev/zero", "/dev/zero"], "is a device, not a regular file"),
        (vec!["baseline", "promote", fifo, "--trusted"], "is a FIFO, not a regular file"),
    ] {
        let out = gauntlet(&args, &[], Duration::from_secs(15));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

fn mkfifo_at(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    unsafe extern "C" {
        fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
    // SAFETY: mkfifo on a valid NUL-terminated path.
    assert_eq!(unsafe { mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Issue 32 D8: `report RUN` and `plan --changed-files F` read what they are named by the one file rule: a FIFO
/// given to `report` and `/dev/zero` are refused at once (exit 2, named), never waited on or read without end; a
/// FIFO given to `plan` (a list from `<(git diff …)`) is a pipe read within its deadline, one nobody writes to an
/// empty list.
#[test]
fn report_and_plan_refuse_fifos_and_devices_instead_of_hanging_or_growing() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("run.json");
    mkfifo_at(&fifo);
    let fifo = fifo.to_str().unwrap();
    let manifest = dir.path().join("m.toml");
    std::fs::write(&manifest, "version = 1\n[profiles.a]\nbase_url = \"http://127.0.0.1:1\"\n").unwrap();
    let m = manifest.to_str().unwrap();
    for (args, want) in [
        (vec!["report", fifo], "is a FIFO, not a regular file"),
        (vec!["report", "/dev/zero"], "is a device, not a regular file"),
        (vec!["plan", "--changed-files", "/dev/zero", "--manifest", m], "is a device"),
    ] {
        let out = gauntlet(&args, &[], Duration::from_secs(15));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    let out = gauntlet(&["plan", "--changed-files", fifo, "--manifest", m], &[], Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 32 D9: a symlink planted in `--out` under the name of a file gauntlet creates (`server.log`) is refused,
/// never written through: the file it points to keeps its bytes, and the run says why (infrastructure, exit 3).
#[test]
fn a_symlink_planted_in_the_output_folder_is_never_written_through() {
    let f = Fixture::new("planted-log");
    let manifest = f.write();
    let out = f.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = f.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("server.log")).unwrap();
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[], Duration::from_secs(60)), &out);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "written through the link: {}", run.explain());
    assert_eq!(run.code, 3, "{}", run.explain());
    assert!(run.stderr.contains("server.log") && run.stderr.contains("symbolic link"), "{}", run.explain());
    assert_no_survivors(&f.tag);

    // The same planted in a qualification's --out: the link is not written through, and R7 judges the bundle as
    // `verify` does (it passed a bundle that `verify` then called invalid).
    let manifest = f.write_qualifiable();
    let out = f.path().join("bundle");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("server.log")).unwrap();
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(60));
    assert_no_survivors(&f.tag);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "written through the link: {stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("qualification.json")).unwrap()).unwrap();
    let r7 = report["stages"].as_array().unwrap().iter().find(|s| s["id"] == "R7").unwrap();
    assert_eq!(r7["status"], "fail", "{r7}");
    assert!(r7["failures"].to_string().contains("`server.log` is not a regular file"), "{r7}");
    assert_ne!(o.status.code(), Some(0), "{stderr}");
}

/// D4: secrets in a spawned server's `environment`, by their name (`HF_TOKEN`, `OPENAI_API_KEY`) or marked with
/// `secret_environment` (here a short one), reach no file of the run and no record of the store: the identity
/// shows the variable with `[redacted]` for its value, and the promoted record verifies.
#[test]
fn secret_variables_of_a_server_environment_reach_no_record_report_or_store() {
    const TOKEN: &str = "hf_gauntletLEAKtoken0042";
    const API_KEY: &str = "sk-gauntlet-env-LEAK-77";
    const MARKED: &str = "zq-9x4";
    let f = Fixture::new("env-secret").profile(&format!(
        "environment = {{ HF_TOKEN = \"{TOKEN}\", OPENAI_API_KEY = \"{API_KEY}\", MY_SETTING = \"{MARKED}\", \
         THREADS = \"4\" }}\nsecret_environment = [\"MY_SETTING\"]"
    ));
    let store = f.path().join("store");
    let run = f.run(&["--store", store.to_str().unwrap(), "--promote", "--trusted"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let env = &run.record.as_ref().unwrap()["identity"]["recipe"]["environment"];
    assert_eq!(env["HF_TOKEN"], "[redacted]", "{env}");
    assert_eq!(env["OPENAI_API_KEY"], "[redacted]", "{env}");
    assert_eq!(env["MY_SETTING"], "[redacted]", "{env}");
    assert_eq!(env["THREADS"], "4", "{env}");
    let written: Vec<_> = files_under(&run.out).into_iter().chain(files_under(&store)).collect();
    assert!(written.iter().any(|(p, _)| p.ends_with("report.html")), "a report was written");
    assert!(written.iter().any(|(p, _)| p.parent().is_some_and(|d| d.ends_with("records"))), "a record was stored");
    for (path, bytes) in written {
        let text = String::from_utf8_lossy(&bytes);
        for secret in [TOKEN, API_KEY, MARKED] {
            assert!(!text.contains(secret), "`{secret}` is written into {}", path.display());
        }
    }
    for secret in [TOKEN, API_KEY, MARKED] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret), "{}", run.explain());
    }
    let verify = gauntlet(&["baseline", "verify", "--store", store.to_str().unwrap()], &[], Duration::from_secs(30));
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}
