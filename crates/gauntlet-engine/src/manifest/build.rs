//! `[servers.NAME.build]`: how gauntlet builds a server before it starts it (the seed's capped build step).
//! Only parsing and validation live here; running a build is `crate::build`'s job. Never runs anything.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use toml::{Table, Value};

use super::fields::{Problems, Reader, type_name};

/// The seed's cap for a build.
pub const DEFAULT_BUILD_TIMEOUT: Duration = Duration::from_secs(12 * 60);
/// No build may be capped beyond this (a typo such as "300m" must not make a wait unbounded in practice).
const MAX_BUILD_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// A validated build step.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildSpec {
    /// The server this build belongs to (named in messages).
    pub server: String,
    /// argvs run in order (configure, then build), never through a shell. `argv[0]` holding a `/` was resolved
    /// inside the manifest root; a bare name is looked up on `PATH`.
    pub commands: Vec<Vec<String>>,
    /// The persistent build directory (created when absent); the commands' working directory.
    pub dir: PathBuf,
    /// A tree whose content digest keys the build: unchanged source and commands → the build is skipped.
    pub source: Option<PathBuf>,
    pub timeout: Duration,
    pub environment: BTreeMap<String, String>,
}

/// Reads `build` of a server table at `path`; `inside_root` resolves a manifest path (and reports one that leaves
/// the root).
pub(crate) fn read_build(
    p: &mut Problems,
    server: &str,
    t: &Table,
    path: &str,
    inside_root: &mut dyn FnMut(&mut Problems, &str, &str) -> Option<PathBuf>,
) -> Option<BuildSpec> {
    p.unknown_keys(t, path, super::contract::keys::<super::contract::Build>());
    let r = Reader::new(t, path.to_owned());
    let commands = read_commands(p, &r, inside_root);
    let dir = r.required_string(p, "dir").and_then(|d| inside_root(p, &r.at("dir"), &d));
    let source = r.string(p, "source").and_then(|s| inside_root(p, &r.at("source"), &s));
    let timeout = if r.has("timeout") { r.duration(p, "timeout", MAX_BUILD_TIMEOUT)? } else { DEFAULT_BUILD_TIMEOUT };
    let environment = r.string_map(p, "environment").unwrap_or_default();
    Some(BuildSpec { server: server.to_owned(), commands: commands?, dir: dir?, source, timeout, environment })
}

/// `command`: one argv (`["make", "-j2"]`) or a list of argvs run in order; every element a non-empty string.
fn read_commands(
    p: &mut Problems,
    r: &Reader,
    inside_root: &mut dyn FnMut(&mut Problems, &str, &str) -> Option<PathBuf>,
) -> Option<Vec<Vec<String>>> {
    let at = r.at("command");
    let Some(v) = r.table.get("command") else {
        p.error(&at, "required: an argv such as [\"make\", \"-j2\"] or a list of argvs");
        return None;
    };
    let Value::Array(items) = v else {
        p.error(&at, format!("expected an array of strings or of arrays of strings, found {}", type_name(v)));
        return None;
    };
    let nested = items.first().is_some_and(Value::is_array);
    let argvs: Vec<(String, &Vec<Value>)> = if nested {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Array(a) => out.push((format!("{at}[{i}]"), a)),
                other => {
                    p.error(&format!("{at}[{i}]"), format!("expected an argv (array), found {}", type_name(other)));
                    return None;
                }
            }
        }
        out
    } else {
        vec![(at.clone(), items)]
    };
    if argvs.is_empty() {
        p.error(&at, "must not be empty");
        return None;
    }
    let mut commands = Vec::new();
    let mut ok = true;
    for (where_, argv) in argvs {
        if argv.is_empty() {
            p.error(&where_, "an argv must not be empty");
            ok = false;
            continue;
        }
        let mut words = Vec::new();
        for (j, w) in argv.iter().enumerate() {
            match w {
                Value::String(s) if !s.is_empty() => words.push(s.clone()),
                Value::String(_) => {
                    p.error(&format!("{where_}[{j}]"), "must not be an empty string");
                    ok = false;
                }
                other => {
                    p.error(&format!("{where_}[{j}]"), format!("expected a string, found {}", type_name(other)));
                    ok = false;
                }
            }
        }
        if let Some(program) = words.first().cloned()
            && program.contains('/')
        {
            match inside_root(p, &format!("{where_}[0]"), &program) {
                Some(resolved) => words[0] = resolved.display().to_string(),
                None => ok = false,
            }
        }
        commands.push(words);
    }
    ok.then_some(commands)
}
