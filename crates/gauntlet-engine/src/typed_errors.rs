//! Errors are types (issue 33 item 6; docs/ARCHITECTURE.md): no public function of the engine returns
//! `Result<_, String>`. Reads the engine's own source files line by line: every `pub` (or `pub(crate)`) function
//! and every method of a `pub trait` whose return type holds a `Result<…, String>` is named. A `#[cfg(test)]`
//! module is not read (the rest of its file is skipped). Test-only; never part of the library.

use std::path::{Path, PathBuf};

/// Whether a type's text holds a `Result<T, String>` anywhere (`(Result<T, String>, f64)` included), where the
/// error is the plain `String`; `io::Result<String>` and `Result<String, E>` are not.
fn holds_string_error(ty: &str) -> bool {
    let ty: String = ty.split_whitespace().collect();
    ty.match_indices("Result<").any(|(at, _)| {
        // The arguments of this `Result<…>`, split at top-level commas.
        let mut depth = 0usize;
        let mut args = vec![String::new()];
        for c in ty[at + "Result<".len()..].chars() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' if depth == 0 => break,
                '>' | ')' | ']' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut().expect("one argument at least").push(c);
        }
        args.len() == 2 && matches!(args[1].as_str(), "String" | "std::string::String")
    })
}

/// The signatures in one file's text that return a string error: `(line, signature)`, the line 1-based.
fn string_errors(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // The indentation of the `pub trait` whose body is being read.
    let mut trait_indent: Option<usize> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let code = line.trim_start();
        let indent = line.len() - code.len();
        if code.starts_with("#[cfg(test)]") && lines.get(i + 1).is_some_and(|l| l.trim_start().starts_with("mod ")) {
            break;
        }
        if let Some(t) = trait_indent
            && indent == t
            && code.starts_with('}')
        {
            trait_indent = None;
        }
        if code.starts_with("pub trait ") && !code.ends_with('}') {
            trait_indent = Some(indent);
        }
        let visibility = ["pub ", "pub(crate) "].iter().find_map(|p| code.strip_prefix(p));
        let after = visibility
            .or_else(|| trait_indent.filter(|t| indent > *t).map(|_| code))
            .map(|rest| ["async ", "const ", "unsafe "].iter().fold(rest, |r, q| r.strip_prefix(q).unwrap_or(r)));
        if after.is_some_and(|rest| rest.starts_with("fn ")) {
            // The signature: up to its body's `{` or the declaration's `;`.
            let start = i;
            let mut signature = String::new();
            loop {
                let l = lines[i].trim();
                let end = l.find(" {").or_else(|| l.strip_suffix(';').map(str::len));
                signature.push_str(&l[..end.unwrap_or(l.len())]);
                signature.push(' ');
                if end.is_some() || i + 1 == lines.len() {
                    break;
                }
                i += 1;
            }
            if let Some((_, ret)) = signature.rsplit_once(") ->")
                && holds_string_error(ret.split(" where ").next().unwrap_or(ret))
            {
                out.push((start + 1, signature.trim().to_owned()));
            }
        }
        i += 1;
    }
    out
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).expect("readable source dir") {
            rust_files(&e.expect("dir entry").path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

#[test]
fn no_public_function_of_the_engine_returns_a_string_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "the engine's sources were not found under {}", src.display());
    let mut found = Vec::new();
    // This file's own examples are not the engine's functions.
    for file in files.into_iter().filter(|f| !f.ends_with("typed_errors.rs")) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (line, signature) in string_errors(&text) {
            found.push(format!("{}:{line}: {signature}", file.strip_prefix(&src).unwrap_or(&file).display()));
        }
    }
    assert!(found.is_empty(), "return a thiserror enum, not `String` (docs/ARCHITECTURE.md):\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_string_errors_and_only_those() {
    let text = "pub fn a(x: u8) -> Result<u8, String> {\n\
                pub async fn b(\n    x: u8,\n) -> (Result<Vec<(u8, u8)>, String>, f64) {\n\
                pub(crate) fn c() -> Result<HashMap<String, String>, String>;\n\
                pub trait P {\n    fn d(&self) -> Result<Value, String>;\n    fn e(&self) -> Result<(), E>;\n}\n\
                fn private() -> Result<(), String> {\n\
                pub fn f() -> std::io::Result<String> {\n\
                pub fn g() -> Result<String, MyError> {\n\
                pub fn h(r: Result<u8, String>) -> u8 {\n\
                #[cfg(test)]\nmod tests {\n    pub fn t() -> Result<(), String> {\n}\n";
    let names: Vec<usize> = string_errors(text).into_iter().map(|(line, _)| line).collect();
    assert_eq!(names, vec![1, 2, 5, 7]);
}
