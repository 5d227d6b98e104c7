//! Strict readers for TOML values: every problem is collected with its key path, nothing is coerced.
//! `true` is not a count, `1.5` is not a count, `"2"` is not a count, and an integer is not a duration.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::{Table, Value};

#[derive(Debug, Default)]
pub(crate) struct Problems {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl Problems {
    pub fn error(&mut self, path: &str, msg: impl std::fmt::Display) {
        self.errors.push(format!("{path}: {msg}"));
    }

    /// Keys we do not know are warned about (a typo should be seen), never silently used.
    pub fn unknown_keys(&mut self, t: &Table, path: &str, known: &[&str]) {
        for key in t.keys() {
            if !known.contains(&key.as_str()) {
                self.warnings.push(format!("{}: unknown key, ignored", join(path, key)));
            }
        }
    }
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
