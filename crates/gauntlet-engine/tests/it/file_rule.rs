//! Issue 32 item 4: one file-opening rule. Every file gauntlet reads from a bundle, a store, a run folder, its home
//! or the command line, and every file it creates in an output folder, goes through `util::bounded`. This test
//! reads the sources of the engine and the binary and lists every other call that opens, reads, lists or creates
//! a file; each must be in [`ALLOWED`] with its reason, and the count must match exactly: a new call that bypasses
//! the helper fails here until it is either routed through it or given a reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The calls that open a file or a folder outside the helper.
const PATTERNS: &[&str] = &[
    "fs::read(",
    "fs::read_to_string(",
    "File::open(",
    "read_dir(",
    "File::create(",
    "fs::write(",
    "fs::copy(",
    "OpenOptions::new()",
    "File::options()",
];

/// (file under `crates/`, pattern, how many, why it is not `util::bounded`).
const ALLOWED: &[(&str, &str, usize, &str)] = &[
    ("gauntlet-engine/src/util/bounded.rs", "OpenOptions::new()", 6, "the helper itself"),
    ("gauntlet-engine/src/layers.rs", "fs::read_to_string(", 5, "test-only: reads the engine's own sources"),
    ("gauntlet-engine/src/layers.rs", "read_dir(", 2, "test-only: lists the engine's own sources"),
    ("gauntlet-engine/src/typed_errors.rs", "fs::read_to_string(", 1, "test-only: reads the engine's own sources"),
    ("gauntlet-engine/src/typed_errors.rs", "read_dir(", 1, "test-only: lists the engine's own sources"),
    ("gauntlet-engine/src/doctor.rs", "fs::read_to_string(", 1, "/proc/cpuinfo: a kernel file"),
    ("gauntlet-engine/src/session/identity.rs", "fs::read_to_string(", 1, "/proc/cpuinfo: a kernel file"),
    ("gauntlet-engine/src/server/group.rs", "fs::read_to_string(", 2, "/proc/PID/stat and comm: kernel files"),
    (
        "gauntlet-engine/src/server/group.rs",
        "File::open(",
        2,
        "/proc/PID/environ and cmdline, read bounded: kernel files",
    ),
    ("gauntlet-engine/src/server/cgroup.rs", "fs::read_to_string(", 2, "/proc/self/cgroup and mountinfo: kernel files"),
    ("gauntlet-engine/src/server/cgroup.rs", "fs::write(", 2, "cgroup.kill and pids.max: cgroup control files"),
    ("gauntlet-engine/src/server/process.rs", "fs::read_to_string(", 2, "/proc/PID/stat: kernel files"),
    ("gauntlet-engine/src/server/sched.rs", "read_dir(", 1, "lists /proc/PID/task (each schedstat is read bounded)"),
    ("gauntlet-engine/src/server/group.rs", "read_dir(", 1, "lists /proc"),
    ("gauntlet-engine/src/server/probe.rs", "read_dir(", 1, "lists sysfs's cache folders (each field is read bounded)"),
    ("gauntlet-engine/src/server/port_owner.rs", "fs::read_to_string(", 1, "/proc/net/tcp*: kernel files"),
    ("gauntlet-engine/src/server/port_owner.rs", "read_dir(", 2, "lists /proc and /proc/PID/fd"),
    ("gauntlet-engine/src/qualify/drift.rs", "fs::read_to_string(", 1, "/proc/PID/status: a kernel file"),
    ("gauntlet-engine/src/sentry/gpu.rs", "fs::read_to_string(", 3, "/proc/PID/comm, sysfs and KFD properties"),
    ("gauntlet-engine/src/sentry/gpu.rs", "read_dir(", 4, "lists sysfs, KFD topology and the GPU lock folder"),
    (
        "gauntlet-engine/src/sentry/gpu.rs",
        "File::options()",
        1,
        "the host-wide GPU lock (flock; create, never truncate)",
    ),
    ("gauntlet-engine/src/sentry/kmsg.rs", "fs::read_to_string(", 2, "/proc/sys/kernel/* and the boot id"),
    ("gauntlet-engine/src/sentry/kmsg.rs", "File::open(", 1, "/dev/kmsg or a replay file: a stream by design"),
    (
        "gauntlet-engine/src/store/store.rs",
        "File::options()",
        1,
        "the store's lock: O_NOFOLLOW|O_NONBLOCK, regular file checked",
    ),
    (
        "gauntlet-engine/src/store/store.rs",
        "read_dir(",
        3,
        "lists history/ and records/ (identities, temporaries, verify); files read bounded",
    ),
    ("gauntlet-engine/src/qualify/verify.rs", "read_dir(", 2, "lists the bundle; files read bounded"),
    ("gauntlet-engine/src/qualify/r2_lm_eval.rs", "read_dir(", 3, "lists lm-eval's output and the task folder"),
    ("gauntlet-engine/src/report/merge.rs", "read_dir(", 1, "lists shard folders; files read bounded"),
    ("gauntlet-engine/src/build/source.rs", "read_dir(", 1, "lists a build's source tree; files hashed bounded"),
    ("gauntlet-engine/src/util/mod.rs", "fs::read_to_string(", 2, "/proc/sys/kernel/hostname, /proc/cpuinfo"),
    ("gauntlet-engine/src/util/mod.rs", "read_dir(", 1, "lists a model folder; files hashed bounded"),
    ("gauntlet/src/commands/init.rs", "OpenOptions::new()", 1, "`init` writes a new manifest: create_new"),
    ("gauntlet/src/book.rs", "fs::read_to_string(", 2, "test-only: reads the book's pages"),
    ("gauntlet/src/book.rs", "fs::write(", 1, "test-only: GAUNTLET_BLESS writes the generated pages"),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/").to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("readable source dir").map(|e| e.expect("dir entry").path()).collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            rust_files(&e, out);
        } else if e.extension().is_some_and(|x| x == "rs") {
            out.push(e);
        }
    }
}

/// The code of a source file: its unit tests (from `#[cfg(test)] mod` on) and `//` comments left out.
fn code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if i == 0 || l.as_bytes()[i - 1] != b':' => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// (file, pattern) → count, over the engine's, the binary's and the schema's sources.
fn calls() -> BTreeMap<(String, String), usize> {
    let root = crates_dir();
    let mut files = Vec::new();
    for krate in ["gauntlet-engine/src", "gauntlet/src", "gauntlet-schema/src"] {
        rust_files(&root.join(krate), &mut files);
    }
    assert!(files.len() > 50, "the sources were not found under {}", root.display());
    let mut out = BTreeMap::new();
    for f in files {
        let text = code(&std::fs::read_to_string(&f).expect("readable source"));
        let name = f.strip_prefix(&root).expect("under crates/").to_string_lossy().into_owned();
        for p in PATTERNS {
            let n = text.matches(p).count();
            if n > 0 {
                out.insert((name.clone(), (*p).to_owned()), n);
            }
        }
    }
    out
}

#[test]
fn every_file_is_opened_through_the_one_helper_or_has_a_reason() {
    let found = calls();
    let mut bad = Vec::new();
    for ((file, pattern), n) in &found {
        match ALLOWED.iter().find(|(f, p, _, _)| f == file && p == pattern) {
            None => bad.push(format!("{file}: {n} × `{pattern}` bypasses util::bounded")),
            Some((_, _, allowed, why)) if allowed != n => {
                bad.push(format!("{file}: {n} × `{pattern}`, the allow-list says {allowed} ({why})"))
            }
            Some(_) => {}
        }
    }
    for (file, pattern, n, _) in ALLOWED {
        if !found.contains_key(&((*file).to_owned(), (*pattern).to_owned())) {
            bad.push(format!("{file}: the allow-list names {n} × `{pattern}`, which is no longer there"));
        }
    }
    assert!(bad.is_empty(), "{} file call(s) against the one file rule:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_scan_sees_calls_in_code_but_not_in_comments_or_unit_tests() {
    let text = "fn a() { std::fs::read_to_string(p); }\n// std::fs::read(p)\nlet u = \"http://x\"; File::open(q);\n\
                #[cfg(test)]\nmod tests { fn t() { std::fs::write(p, b\"\"); } }\n";
    let c = code(text);
    assert_eq!(c.matches("fs::read_to_string(").count(), 1);
    assert_eq!(c.matches("File::open(").count(), 1, "{c}");
    assert!(!c.contains("fs::read(") && !c.contains("fs::write("), "{c}");
}
