//! The engine's layers, enforced (issue 16 item 5; the picture is in docs/ARCHITECTURE.md). Reads the engine's
//! own source files, computes the graph of its top-level modules from every `crate::x` and `use crate::{x, …}`
//! reference outside comments, and checks that (a) no cycle joins two modules and (b) every edge is one the
//! table [`ALLOWED`] permits. A new top-level module must be given its row. Inside a module's folder, no cycle
//! joins two of its files either (`super::x` references). Test-only; never part of the library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each top-level module may use of the engine (the schema crate and external crates are always allowed).
/// Lowest first. `util` and `suite` use nothing above them; `manifest` only those; `report`, `compare` and
/// `verdict` read typed records and use no engine module but `compare` (verdict applies its findings) and, for
/// `report --merge`'s shards, `util`'s bounded reader.
const ALLOWED: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("suite", &["util"]),
    ("kinds", &[]),
    ("manifest", &["util", "suite", "kinds"]),
    ("identity", &["util", "manifest"]),
    ("store", &["util", "manifest", "identity"]),
    ("sentry", &["util", "manifest"]),
    ("server", &["util", "manifest"]),
    ("client", &["util", "manifest"]),
    ("build", &["util", "manifest", "server"]),
    ("bench", &["util"]),
    ("formats", &["util", "bench"]),
    ("plan", &["util", "manifest"]),
    ("compare", &[]),
    ("verdict", &["compare"]),
    ("report", &["util"]),
    ("session", &["util", "suite", "manifest", "identity", "store", "sentry", "server", "client", "build", "kinds"]),
    (
        "run",
        &[
            "util", "suite", "manifest", "identity", "store", "sentry", "server", "client", "build", "session",
            "bench", "compare", "verdict", "report",
        ],
    ),
    (
        "qualify",
        &[
            "util", "suite", "manifest", "identity", "store", "sentry", "server", "client", "build", "session",
            "bench", "compare", "verdict", "report", "run",
        ],
    ),
    ("doctor", &["util", "suite", "manifest", "identity", "store", "sentry", "server", "client", "build", "session"]),
];

/// The top-level modules `lib.rs` declares (`mod x;` / `pub mod x;`), the test-only checks (this one and
/// `typed_errors`) left out.
fn declared_modules(lib: &str) -> Vec<String> {
    strip_comments(lib)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?.trim();
            (name != "layers" && name != "typed_errors").then(|| name.to_owned())
        })
        .collect()
}

/// The text without `//…` line comments (doc comments included) and `/* … */` block comments. A `//` right after
/// a `:` is kept (a URL in a string), so that stripping never hides code that follows one.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            i = text[i..].find("*/").map_or(b.len(), |e| i + e + 2);
        } else if b[i..].starts_with(b"//") && (i == 0 || b[i - 1] != b':') {
            i = text[i..].find('\n').map_or(b.len(), |e| i + e);
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The top-level modules one source text names: `crate::x…` anywhere and every item of `use crate::{a, b::c, …}`.
fn references(text: &str) -> BTreeSet<String> {
    let code = strip_comments(text);
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `$crate::` and `gauntlet_crate::` are not this crate's root.
        if at > 0 && code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).expect("readable source dir").map(|e| e.expect("dir entry").path()).collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// Module → the other top-level modules it references, with one file that does (for the message).
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let modules = declared_modules(&lib);
    let mut g = BTreeMap::new();
    for m in &modules {
        let mut files = Vec::new();
        rust_files(&src.join(format!("{m}.rs")), &mut files);
        rust_files(&src.join(m), &mut files);
        assert!(!files.is_empty(), "module `{m}` has no source file under {}", src.display());
        let edges: &mut BTreeMap<String, String> = g.entry(m.clone()).or_default();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("readable source");
            for r in references(&text) {
                if &r != m && modules.contains(&r) {
                    let shown = f.strip_prefix(src).unwrap_or(&f).display().to_string();
                    edges.entry(r).or_insert(shown);
                }
            }
        }
    }
    g
}

/// One cycle of the graph, as the modules along it (first repeated at the end), or None.
fn find_cycle(g: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeMap<String, String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_owned(), 1);
        path.push(m.to_owned());
        for next in g.get(m).into_iter().flat_map(|e| e.keys()) {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(m, g, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// Every edge the table does not allow, as `a → b (file)`, and every module without a row.
fn violations(g: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (m, edges) in g {
        let Some((_, allowed)) = ALLOWED.iter().find(|(name, _)| name == m) else {
            out.push(format!("module `{m}` has no row in layers::ALLOWED: place it in a layer"));
            continue;
        };
        for (to, file) in edges {
            if !allowed.contains(&to.as_str()) {
                out.push(format!("{m} → {to} ({file}) is not allowed by the layers"));
            }
        }
    }
    out
}

/// For each top-level module with a folder: its submodules' graph, from `super::x` (in the folder's own files)
/// and `crate::module::x` references between sibling files.
fn submodule_graphs(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut out = BTreeMap::new();
    for m in declared_modules(&lib) {
        let dir = src.join(&m);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        let subs: Vec<String> = files
            .iter()
            .filter_map(|f| {
                let stem = f.file_stem()?.to_str()?.to_owned();
                (stem != "mod" && (f.is_dir() || f.extension().is_some_and(|e| e == "rs"))).then_some(stem)
            })
            .collect();
        let g: &mut BTreeMap<String, BTreeMap<String, String>> = out.entry(m.clone()).or_default();
        for f in files.iter().filter(|f| f.is_file() && f.extension().is_some_and(|e| e == "rs")) {
            let Some(me) = f.file_stem().and_then(|s| s.to_str()).filter(|s| *s != "mod") else { continue };
            let code = strip_comments(&std::fs::read_to_string(f).expect("readable source"));
            let edges = g.entry(me.to_owned()).or_default();
            for prefix in ["super::".to_owned(), format!("crate::{m}::")] {
                for (at, _) in code.match_indices(&prefix) {
                    let name: String =
                        code[at + prefix.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if name != me && subs.contains(&name) {
                        edges.entry(name).or_insert_with(|| format!("{m}/{me}.rs"));
                    }
                }
            }
        }
    }
    out
}

fn engine_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_cycle_among_the_engines_top_level_modules() {
    let g = graph(&engine_src());
    assert!(g.len() > 10, "the graph was not read: {g:?}");
    if let Some(cycle) = find_cycle(&g) {
        let steps: Vec<String> =
            cycle.windows(2).map(|w| format!("{} → {} ({})", w[0], w[1], g[&w[0]][&w[1]])).collect();
        panic!("module cycle: {}", steps.join(", "));
    }
}

#[test]
fn no_cycle_among_the_submodules_of_a_module() {
    let graphs = submodule_graphs(&engine_src());
    assert!(graphs.get("server").is_some_and(|g| g.len() >= 2), "the submodules were not read: {graphs:?}");
    let cycles: Vec<String> =
        graphs.iter().filter_map(|(m, g)| find_cycle(g).map(|c| format!("{m}: {}", c.join(" → ")))).collect();
    assert!(cycles.is_empty(), "submodule cycle(s):\n{}", cycles.join("\n"));
}

#[test]
fn every_dependency_follows_the_layers() {
    let bad = violations(&graph(&engine_src()));
    assert!(bad.is_empty(), "{} edge(s) against the layers:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_table_itself_has_no_cycle_and_names_only_real_modules() {
    let lib = std::fs::read_to_string(engine_src().join("lib.rs")).expect("lib.rs");
    let modules = declared_modules(&lib);
    let table: BTreeMap<String, BTreeMap<String, String>> = ALLOWED
        .iter()
        .map(|(m, to)| (m.to_string(), to.iter().map(|t| (t.to_string(), "table".to_string())).collect()))
        .collect();
    assert_eq!(find_cycle(&table), None, "the allowed table must itself be a layering");
    for (m, to) in ALLOWED {
        for name in std::iter::once(m).chain(to.iter()) {
            assert!(modules.iter().any(|x| x == name), "ALLOWED names `{name}`, which lib.rs does not declare");
        }
    }
}

#[test]
fn references_are_read_from_code_not_comments() {
    let text = "//! see `crate::run`\nuse crate::{manifest::{Profile, Target}, util, self};\n/* crate::qualify */\n\
                fn f() { let _ = crate::sentry::gpu::probe(); let u = \"http://x\"; crate::build::go(); }\n\
                // crate::report\nuse gauntlet_schema::crate_like; $crate::store::x();\n";
    let refs: Vec<String> = references(text).into_iter().collect();
    assert_eq!(refs, ["build", "manifest", "sentry", "util"]);
}

#[test]
fn a_cycle_is_found_and_named() {
    let edge = |a: &str, b: &str| (a.to_owned(), BTreeMap::from([(b.to_owned(), String::new())]));
    let g = BTreeMap::from([edge("a", "b"), edge("b", "c"), edge("c", "a"), ("d".to_owned(), BTreeMap::new())]);
    assert_eq!(find_cycle(&g), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let g = BTreeMap::from([edge("a", "b"), edge("b", "c"), ("c".to_owned(), BTreeMap::new())]);
    assert_eq!(find_cycle(&g), None);
}
