//! Strict readers for TOML values: every problem is collected with its key path, nothing is coerced.
//! `true` is not a count, `1.5` is not a count, `"2"` is not a count, and an integer is not a duration.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use toml::{Table, Value};

use crate::util::bounded::PipeReadError;

#[derive(Debug, Default)]
pub(crate) struct Problems {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl Problems {
    pub fn error(&mut self, path: &str, msg: impl std::fmt::Display) {
        self.errors.push(format!("{path}: {msg}"));
    }

    /// A key we do not know is an error (a typo must not silently leave a default in force), with the known key
    /// it most likely misspells.
    pub fn unknown_keys(&mut self, t: &Table, path: &str, known: &[&str]) {
        for key in t.keys() {
            if !known.contains(&key.as_str()) {
                self.error(&join(path, key), crate::util::suggest::unknown_key_message(key, known));
            }
        }
    }

    /// Every string of the document, keys included, is one line of text: a control character (CR, LF, NUL, …)
    /// would reach a command line, an HTTP request line or header, or a path, so it is refused wherever it is.
    pub fn control_characters(&mut self, t: &Table, path: &str) {
        for (key, v) in t {
            let at = join(path, key);
            if let Some(c) = key.chars().find(|c| c.is_control()) {
                self.error(&at, format!("the key holds control character U+{:04X}", c as u32));
            }
            self.control_characters_in(v, &at);
        }
    }

    fn control_characters_in(&mut self, v: &Value, at: &str) {
        match v {
            Value::String(s) => {
                if let Some(c) = s.chars().find(|c| c.is_control()) {
                    self.error(
                        at,
                        format!("control character U+{:04X} in a string (one line of text expected)", c as u32),
                    );
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.control_characters_in(item, &format!("{at}[{i}]"));
                }
            }
            Value::Table(t) => self.control_characters(t, at),
            _ => {}
        }
    }
}

/// The largest manifest (or suite file) read: a bigger file is refused before parsing, from its size alone.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// How long a manifest given as a pipe (`--manifest <(generate)`, a FIFO) may take to arrive in full.
pub const PIPE_DEADLINE: std::time::Duration = crate::util::bounded::PIPE_DEADLINE;

/// A manifest's or suite's text by the one file rule ([`crate::util::bounded::read_text_or_pipe`]): a regular file
/// or a pipe (a manifest from process substitution) within [`PIPE_DEADLINE`], at most `cap` bytes.
pub(crate) fn read_capped(path: &std::path::Path, cap: u64) -> Result<String, PipeReadError> {
    read_capped_within(path, cap, PIPE_DEADLINE)
}

fn read_capped_within(
    path: &std::path::Path,
    cap: u64,
    deadline: std::time::Duration,
) -> Result<String, PipeReadError> {
    crate::util::bounded::read_text_or_pipe(path, cap, deadline)
}

/// An attached server's address: `http[s]://HOST[:PORT][/PATH]`, HOST an ASCII host name, an IPv4 address or a
/// bracketed IPv6 address, PORT in 1..=65535, no credentials, query or fragment, no space or control character.
pub(crate) fn base_url_problem(url: &str) -> Option<String> {
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return Some(format!("`{}` must be an http:// or https:// URL", url.escape_debug()));
    };
    if let Some(c) = url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Some(format!("`{}`: character U+{:04X} is not allowed in a URL", url.escape_debug(), c as u32));
    }
    if !url.is_ascii() {
        return Some(format!("`{url}`: not ASCII (write an internationalised host in its xn-- form)"));
    }
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    if authority.contains('@') {
        return Some(format!("`{url}`: credentials in the URL are not allowed (use `api_key_env`)"));
    }
    if url.contains(['?', '#']) {
        return Some(format!("`{url}`: a base URL has no query or fragment"));
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let Some((addr, after)) = v6.split_once(']') else {
                return Some(format!("`{url}`: unclosed `[` in the host"));
            };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Some(format!("`{url}`: `{addr}` is not an IPv6 address"));
            }
            match after {
                "" => (addr, None),
                p if p.starts_with(':') => (addr, Some(&p[1..])),
                _ => return Some(format!("`{url}`: unexpected `{after}` after the IPv6 address")),
            }
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if !authority.starts_with('[') {
        let label_ok = |l: &str| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        let numeric = host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if host.is_empty()
            || host.len() > 253
            || !host.trim_end_matches('.').split('.').all(label_ok)
            || (numeric && host.parse::<std::net::Ipv4Addr>().is_err())
        {
            return Some(format!("`{url}`: `{host}` is not a valid host name or address"));
        }
    }
    if let Some(p) = port {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) && p.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return Some(format!("`{url}`: port `{p}` is not in 1..=65535")),
        }
    }
    if path.contains("//") || path.split('/').any(|seg| seg == "..") {
        return Some(format!("`{url}`: the path `{path}` is not a plain prefix"));
    }
    None
}

/// A manifest path is relative, and stays inside the root once `.` and `..` are resolved lexically.
pub(crate) fn inside_root(p: &mut Problems, path: &str, root: &Path, value: &str) -> Option<PathBuf> {
    let rel = Path::new(value);
    if value.is_empty() {
        p.error(path, "must not be empty");
        return None;
    }
    if rel.is_absolute() {
        p.error(path, format!("`{value}` must be relative to the manifest root `{}`", root.display()));
        return None;
    }
    let mut depth: i32 = 0;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => depth = -1,
        }
        if depth < 0 {
            p.error(path, format!("`{value}` leaves the manifest root `{}`", root.display()));
            return None;
        }
    }
    Some(root.join(rel))
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

pub(crate) struct Reader<'a> {
    pub table: &'a Table,
    pub path: String,
}

impl<'a> Reader<'a> {
    pub fn new(table: &'a Table, path: impl Into<String>) -> Self {
        Reader { table, path: path.into() }
    }

    pub fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.table.get(key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    fn expected(&self, p: &mut Problems, key: &str, what: &str, got: &Value) {
        p.error(&self.at(key), format!("expected {what}, found {}", type_name(got)));
    }

    pub fn string(&self, p: &mut Problems, key: &str) -> Option<String> {
        match self.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.expected(p, key, "a string", other);
                None
            }
        }
    }

    pub fn boolean(&self, p: &mut Problems, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Boolean(b) => Some(*b),
            other => {
                self.expected(p, key, "true or false", other);
                None
            }
        }
    }

    pub fn required_string(&self, p: &mut Problems, key: &str) -> Option<String> {
        if !self.has(key) {
            p.error(&self.at(key), "required");
            return None;
        }
        self.string(p, key)
    }

    pub fn integer(&self, p: &mut Problems, key: &str, min: i64, max: i64) -> Option<i64> {
        match self.get(key)? {
            Value::Integer(n) if (min..=max).contains(n) => Some(*n),
            Value::Integer(n) => {
                p.error(&self.at(key), format!("{n} is out of range {min}..={max}"));
                None
            }
            other => {
                self.expected(p, key, "an integer", other);
                None
            }
        }
    }

    /// A float field also takes an integer (1 is a fine ratio); booleans and strings are refused.
    pub fn float(&self, p: &mut Problems, key: &str, min: f64, max: f64) -> Option<f64> {
        let v = match self.get(key)? {
            Value::Float(f) => *f,
            Value::Integer(n) => *n as f64,
            other => {
                self.expected(p, key, "a number", other);
                return None;
            }
        };
        if !(min..=max).contains(&v) || v.is_nan() {
            p.error(&self.at(key), format!("{v} is out of range {min}..={max}"));
            return None;
        }
        Some(v)
    }

    pub fn duration(&self, p: &mut Problems, key: &str, max: Duration) -> Option<Duration> {
        let text = match self.get(key)? {
            Value::String(s) => s,
            other => {
                self.expected(p, key, "a duration string such as \"30s\" or \"2m\"", other);
                return None;
            }
        };
        match humantime::parse_duration(text) {
            Ok(d) if d.is_zero() => {
                p.error(&self.at(key), "must be longer than zero");
                None
            }
            Ok(d) if d > max => {
                p.error(&self.at(key), format!("{text} is longer than the limit {}", humantime::format_duration(max)));
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                p.error(&self.at(key), format!("`{text}` is not a duration ({e})"));
                None
            }
        }
    }

    pub fn string_array(&self, p: &mut Problems, key: &str) -> Option<Vec<String>> {
        let arr = match self.get(key)? {
            Value::Array(a) => a,
            other => {
                self.expected(p, key, "an array of strings", other);
                return None;
            }
        };
        let mut out = Vec::with_capacity(arr.len());
        let mut ok = true;
        for (i, v) in arr.iter().enumerate() {
            match v {
                Value::String(s) => out.push(s.clone()),
                other => {
                    p.error(
                        &format!("{}[{i}]", self.at(key)),
                        format!("expected a string, found {}", type_name(other)),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    pub fn string_map(&self, p: &mut Problems, key: &str) -> Option<BTreeMap<String, String>> {
        let t = self.table_of(p, key)?;
        let mut out = BTreeMap::new();
        for (k, v) in t {
            match v {
                Value::String(s) => {
                    out.insert(k.clone(), s.clone());
                }
                other => p.error(&join(&self.at(key), k), format!("expected a string, found {}", type_name(other))),
            }
        }
        Some(out)
    }

    /// A process environment (`NAME = "value"`): every name non-empty and free of `=`, which would otherwise
    /// smuggle a different variable into the child (`"A=B" = "x"` sets `A` to `B=x`).
    pub fn environment(&self, p: &mut Problems, key: &str) -> Option<BTreeMap<String, String>> {
        let map = self.string_map(p, key)?;
        for name in map.keys() {
            if name.is_empty() || name.contains('=') {
                p.error(&join(&self.at(key), name), "an environment variable name is non-empty and has no `=`");
            }
        }
        Some(map)
    }

    pub fn table_of(&self, p: &mut Problems, key: &str) -> Option<&'a Table> {
        match self.get(key)? {
            Value::Table(t) => Some(t),
            other => {
                self.expected(p, key, "a table", other);
                None
            }
        }
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::{Duration, Instant};

    fn mkfifo(path: &std::path::Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// The test's own end of the FIFO, opened read-write so that it exists before the reader comes: what is
    /// written through it waits in the pipe, and the reader sees end of file only once it is closed.
    fn hold(fifo: &std::path::Path) -> std::fs::File {
        std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(fifo).unwrap()
    }

    /// Waits until the reader has taken everything written so far (so it has the FIFO open).
    fn drained(end: &std::fs::File) {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let mut queued: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            assert_eq!(unsafe { libc::ioctl(end.as_raw_fd(), libc::FIONREAD, &mut queued) }, 0);
            if queued == 0 {
                return;
            }
            assert!(Instant::now() < until, "the reader never read");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn reader(fifo: &std::path::Path, deadline: Duration) -> std::thread::JoinHandle<Result<String, PipeReadError>> {
        let fifo = fifo.to_owned();
        std::thread::spawn(move || read_capped_within(&fifo, 1024, deadline))
    }

    #[test]
    fn a_fifo_is_read_until_its_writer_closes_it_and_one_that_never_closes_ends_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("m.toml");
        mkfifo(&fifo);
        // Nobody writes: empty, at once.
        let started = Instant::now();
        assert_eq!(read_capped_within(&fifo, 1024, Duration::from_secs(5)).unwrap(), "");
        assert!(started.elapsed() < Duration::from_secs(2));
        // A writer that sends its text in two parts, then closes: the whole text.
        let mut end = hold(&fifo);
        end.write_all(b"[profiles.a]\n").unwrap();
        let r = reader(&fifo, Duration::from_secs(10));
        drained(&end);
        end.write_all(b"server = \"s\"\n").unwrap();
        drop(end);
        assert_eq!(r.join().unwrap().unwrap(), "[profiles.a]\nserver = \"s\"\n");
        // A writer that never closes: an error at the deadline, naming it.
        let mut end = hold(&fifo);
        end.write_all(b"# partial").unwrap();
        let started = Instant::now();
        let err = reader(&fifo, Duration::from_millis(300)).join().unwrap().unwrap_err();
        assert!(matches!(err, PipeReadError::PipeUnfinished { arrived: 9, .. }), "{err:?}");
        assert!(err.to_string().contains("did not finish within"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(end);
    }

    #[test]
    fn devices_and_folders_are_refused_and_a_pipe_is_capped() {
        let err = read_capped(std::path::Path::new("/dev/zero"), 1024).unwrap_err().to_string();
        assert!(err.contains("a device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        assert!(read_capped(dir.path(), 1024).unwrap_err().to_string().contains("a folder"));
        let fifo = dir.path().join("big.toml");
        mkfifo(&fifo);
        // Never closed, so only the cap can end the read.
        let mut end = hold(&fifo);
        end.write_all(&[b'#'; 4096]).unwrap();
        let err = reader(&fifo, Duration::from_secs(10)).join().unwrap().unwrap_err();
        assert!(matches!(err, PipeReadError::TooLarge { cap: 1024 }), "{err:?}");
        assert!(err.to_string().contains("limit"), "{err}");
        drop(end);
    }
}
