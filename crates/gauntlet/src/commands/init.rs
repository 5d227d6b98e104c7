//! `gauntlet init`: a starter manifest, written once (never over an existing file). `--attach URL` asks the running
//! server what it is (the engine's self-description, see `gauntlet_engine::session::describe`) and writes an
//! attach profile with the guessed kind and the model it serves; `--spawn KIND --model PATH` writes a profile that
//! starts that engine on the model through the kind's launch template. What it writes passes `gauntlet check`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gauntlet_engine::client::Client;
use gauntlet_engine::kinds;
use gauntlet_engine::manifest::Manifest;

use crate::Outcome;
use crate::exit::{Exit, Failure};
use crate::terminal::outln;

/// Where a new profile's known failures are declared: the first run (no baseline yet) offers the line to paste.
const EXPECTED_FAILURES_HINT: &str = "# Cases this server is known to fail: the first `gauntlet run` (no baseline yet) prints \
     the line to paste here,\n# e.g. expected_failures = [\"tool\", \"json\"]. A case failing as on the baseline is a \
     note either way.\n";

/// Each probe of a running server may take this long.
const PROBE: Duration = Duration::from_secs(5);

pub(crate) fn init(
    attach: Option<&str>,
    spawn: Option<&str>,
    model: Option<&str>,
    revision: Option<&str>,
    out: &Path,
) -> Outcome {
    if out.exists() {
        return Err(Failure::bad_input(format!("`{}` exists; gauntlet init never overwrites a file", out.display())));
    }
    let text = match (attach, spawn, model) {
        (Some(url), _, _) => attach_manifest(url)?,
        (None, Some(kind), Some(model)) => spawn_manifest(kind, model, revision)?,
        _ => return Err(Failure::bad_input("give --attach URL, or --spawn KIND --model PATH")),
    };
    // What is written must load: checked before the file exists.
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Manifest::parse(&text, &out.display().to_string(), dir)
        .map_err(|e| Failure::bad_input(format!("the manifest gauntlet init would write does not load: {e}")))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| Failure::bad_input(format!("cannot create `{}`: {e}", out.display())))?;
    file.write_all(text.as_bytes()).map_err(|e| super::unwritable(out, e))?;
    outln!("wrote {}; check it with `gauntlet check --manifest {}`", out.display(), out.display());
    outln!(
        "the first `gauntlet run --manifest {}` (no baseline yet) offers the cases that fail as an `expected_failures` \
         line to paste",
        out.display()
    );
    Ok(Exit::Pass)
}

/// A TOML basic string: quoted and escaped (a server's text never reaches the file unescaped). A JSON string's
/// escapes (`\"`, `\\`, `\n`, `\uXXXX` …) are all TOML basic-string escapes.
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// One line of a comment: control characters dropped, at most 200 characters.
fn comment(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn attach_manifest(url: &str) -> Result<String, Failure> {
    let url = url.trim_end_matches('/');
    let client = Client::new(url, None);
    let described = gauntlet_engine::session::describe::describe_blocking(&client, PROBE)
        .map_err(|e| Failure::infrastructure(format!("cannot start the async runtime: {e}")))?;
    if described.as_object().is_none_or(|m| m.is_empty()) {
        return Err(Failure::bad_input(format!(
            "{url} answered none of /v1/models and the engines' version and property endpoints: is a server running \
             there?"
        )));
    }
    let kind = gauntlet_engine::session::describe::guess_kind(&described);
    let ids: Vec<String> = described["models"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut t = format!("# Written by `gauntlet init --attach {}`.\n", comment(url));
    t.push_str("# What the server said about itself:\n");
    for (key, value) in described.as_object().into_iter().flatten() {
        t.push_str(&format!("#   {}: {}\n", comment(key), comment(&value.to_string())));
    }
    t.push_str("version = 1\ndefault_profile = \"attached\"\n\n[profiles.attached]\n");
    t.push_str(&format!("base_url = {}\n", quoted(url)));
    match kind {
        Some(k) => t.push_str(&format!("# guessed from what it said\nkind = {}\n", quoted(k.name))),
        None => t.push_str("# the kind could not be guessed; set it if you know it (see docs/src/engines.md)\n"),
    }
    match ids.as_slice() {
        [one] => t.push_str(&format!("request_model = {}\n", quoted(one))),
        [] => t.push_str("# /v1/models listed no model: set request_model\n"),
        several => {
            t.push_str("# the server lists several models: gauntlet asks for this one (the others are)\n");
            for other in &several[1..] {
                t.push_str(&format!("#   {}\n", comment(other)));
            }
            t.push_str(&format!("request_model = {}\n", quoted(&several[0])));
        }
    }
    t.push_str("load_timeout = \"120s\"\nrequest_timeout = \"120s\"\n");
    t.push_str(EXPECTED_FAILURES_HINT);
    Ok(t)
}

fn spawn_manifest(kind_name: &str, model: &str, revision: Option<&str>) -> Result<String, Failure> {
    let Some(kind) = kinds::find(kind_name) else {
        return Err(Failure::bad_input(format!(
            "--spawn: unknown kind `{}` (kinds: {})",
            kind_name.escape_debug(),
            kinds::KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
        )));
    };
    let mut t = format!("# Written by `gauntlet init --spawn {} --model {}`.\n", kind.name, comment(model));
    t.push_str("version = 1\ndefault_profile = \"spawned\"\n");
    let model_table = match revision {
        Some(rev) => format!("[models.model]\nhub = {}\nrevision = {}\n", quoted(model), quoted(rev)),
        None => {
            let path = std::fs::canonicalize(model).map_err(|e| {
                Failure::bad_input(format!("--model `{}`: {e} (a hub id needs --revision HASH)", model.escape_debug()))
            })?;
            let (root, rel) = match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
                _ => {
                    return Err(Failure::bad_input(format!("--model `{}` is not a file or directory", path.display())));
                }
            };
            t.push_str(&format!(
                "# Paths are relative to the model's folder.\nroot = {}\n",
                quoted(&root.display().to_string())
            ));
            format!("[models.model]\npath = {}\n", quoted(&rel.display().to_string()))
        }
    };
    t.push('\n');
    t.push_str(&model_table);
    t.push_str(&format!(
        "\n# `{}` is started from PATH; set `binary` (relative to root) to start another build.\n[servers.server]\nkind = {}\n",
        kind.program,
        quoted(kind.name)
    ));
    t.push_str(&format!(
        "\n[profiles.spawned]\nmodel = \"model\"\nserver = \"server\"\n# Change the port if it is taken.\nport = 18490\n\
         load_timeout = \"600s\"\nrequest_timeout = \"120s\"\n# Tools: {}\n",
        kind.tools
    ));
    t.push_str(EXPECTED_FAILURES_HINT);
    Ok(t)
}
