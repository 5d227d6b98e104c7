//! The one redactor: secret values (an attached server's API key, tokens in gauntlet's own environment, the
//! secret variables of a spawned server's `environment`) are registered once when they are read, and every place
//! where text leaves the process (files through [`super::write_atomic`], store records, terminal lines) passes it
//! through here. A server that echoes a key back cannot make gauntlet write it down.
//!
//! Which variables hold secrets is a rule, not a list of known names: a name that contains `TOKEN`, `KEY`,
//! `SECRET`, `PASSWORD`, `PASSWD`, `AUTH` or `CREDENTIAL` (any case: `HF_TOKEN`, `OPENAI_API_KEY`,
//! `hf_auth`), or one a manifest marks with `secret_environment`. A record that lists an environment
//! ([`environment_for_record`]) shows such a variable's name with [`MARK`] for its value, whatever its length.
//!
//! The registry is process-wide on purpose: a secret is a fact of the process, not of one report, and a writer
//! that forgets to ask for it must still be covered.

use std::borrow::Cow;
use std::sync::Mutex;

/// What a secret is replaced with.
pub const MARK: &str = "[redacted]";

/// An environment variable whose name contains one of these (in any case) holds a secret (CI tokens, keys,
/// passwords, authorization values).
pub const SECRET_NAMES: [&str; 7] = ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL"];
/// A value from the environment shorter than this is not treated as a secret (it would blank out ordinary
/// words); a secret gauntlet was told about by name (`api_key_env`) is redacted whatever its length.
const MIN_AMBIENT_LEN: usize = 8;

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn secrets() -> std::sync::MutexGuard<'static, Vec<String>> {
    SECRETS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers a secret value: it, and the forms it takes once escaped for JSON or XML, are redacted from now on.
pub fn register(secret: &str) {
    if secret.is_empty() {
        return;
    }
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
    let xml = secret
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;");
    let mut all = secrets();
    for form in [secret.to_owned(), json, xml] {
        if !form.is_empty() && !all.contains(&form) {
            all.push(form);
        }
    }
    // Longest first, so a secret that contains another is replaced whole.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Whether a variable of this name holds a secret by its name alone ([`SECRET_NAMES`], any case).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.iter().any(|s| upper.contains(s))
}

/// Registers every value of gauntlet's environment whose variable name says it is a secret.
pub fn register_environment() {
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else { continue };
        if value.len() >= MIN_AMBIENT_LEN && is_secret_name(name) {
            register(value);
        }
    }
}

/// Registers the secrets of an environment a manifest gives a process (a server's, a build's): the value of every
/// variable whose name says so (at least [`MIN_AMBIENT_LEN`] long: a shorter one would blank out ordinary words in
/// every text, and [`environment_for_record`] still hides it where the environment itself is recorded), and the
/// value of every variable in `marked` whatever its length, taken from `environment` or else from gauntlet's own.
pub fn register_variables(environment: &std::collections::BTreeMap<String, String>, marked: &[String]) {
    for (name, value) in environment {
        if marked.contains(name) || (value.len() >= MIN_AMBIENT_LEN && is_secret_name(name)) {
            register(value);
        }
    }
    for name in marked.iter().filter(|n| !environment.contains_key(*n)) {
        if let Ok(value) = std::env::var(name) {
            register(&value);
        }
    }
}

/// `environment` as a record may show it: every variable that is secret by name or `marked` keeps its name, and
/// its value becomes [`MARK`].
pub fn environment_for_record(
    environment: &std::collections::BTreeMap<String, String>,
    marked: &[String],
) -> std::collections::BTreeMap<String, String> {
    environment
        .iter()
        .map(|(name, value)| {
            let secret = marked.contains(name) || is_secret_name(name);
            (name.clone(), if secret { MARK.to_owned() } else { value.clone() })
        })
        .collect()
}

/// Whether any secret is registered (writers skip the work otherwise).
pub fn active() -> bool {
    !secrets().is_empty()
}

/// `text` with every registered secret replaced by [`MARK`].
pub fn text(text: &str) -> Cow<'_, str> {
    let all = secrets();
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MARK);
        }
    }
    Cow::Owned(out)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len()).find(|&i| hay[i] == needle[0] && hay[i..].starts_with(needle))
}

/// `bytes` with every registered secret replaced by [`MARK`] (the bytes need not be UTF-8).
pub fn bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let all = secrets();
    if !all.iter().any(|s| find(bytes, s.as_bytes(), 0).is_some()) {
        return Cow::Borrowed(bytes);
    }
    let mut out = bytes.to_vec();
    for s in all.iter() {
        let needle = s.as_bytes();
        let mut next = Vec::with_capacity(out.len());
        let mut at = 0;
        while let Some(i) = find(&out, needle, at) {
            next.extend_from_slice(&out[at..i]);
            next.extend_from_slice(MARK.as_bytes());
            at = i + needle.len();
        }
        next.extend_from_slice(&out[at..]);
        out = next;
    }
    Cow::Owned(out)
}

/// Every string (and object key) of a JSON value, redacted in place.
pub fn value(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Cow::Owned(r) = text(s) {
                *s = r;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(value),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| matches!(text(k), Cow::Owned(_))).cloned().collect();
            for k in keys {
                if let Some(inner) = map.remove(&k) {
                    map.insert(text(&k).into_owned(), inner);
                }
            }
            map.values_mut().for_each(value);
        }
        _ => {}
    }
}

/// Pieces of one text that arrived in parts (a streamed answer's events): a secret split across pieces is
/// redacted too. The piece where a secret starts gets [`MARK`]; the rest of the secret is removed from the others.
pub fn fragments<'a>(parts: impl IntoIterator<Item = &'a mut String>) {
    let mut parts: Vec<&mut String> = parts.into_iter().collect();
    let joined: String = parts.iter().map(|p| p.as_str()).collect();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for s in secrets().iter() {
        spans.extend(joined.match_indices(s.as_str()).map(|(i, m)| (i, i + m.len())));
    }
    if spans.is_empty() {
        return;
    }
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut offset = 0;
    for part in parts.iter_mut() {
        let (start, end) = (offset, offset + part.len());
        offset = end;
        if !merged.iter().any(|&(a, b)| a < end && b > start) {
            continue;
        }
        let mut out = String::new();
        let mut at = start;
        for &(a, b) in merged.iter().filter(|&&(a, b)| a < end && b > start) {
            if a > at {
                out.push_str(&joined[at..a]);
            }
            if a >= start {
                out.push_str(MARK);
            }
            at = b.min(end);
        }
        if at < end {
            out.push_str(&joined[at..end]);
        }
        **part = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_text_bytes_json_and_split_pieces() {
        register("k3y-UNIT\"<x>");
        assert_eq!(text("Bearer k3y-UNIT\"<x> echoed"), "Bearer [redacted] echoed");
        assert_eq!(&*bytes(b"\xff k3y-UNIT\\\"<x> \xfe"), b"\xff [redacted] \xfe".as_slice(), "JSON-escaped form");
        assert_eq!(text("a k3y-UNIT&quot;&lt;x&gt; b"), "a [redacted] b", "XML-escaped form");
        let mut v = serde_json::json!({"k3y-UNIT\"<x>": ["x k3y-UNIT\"<x>"]});
        value(&mut v);
        assert_eq!(v, serde_json::json!({"[redacted]": ["x [redacted]"]}));
        let mut parts = vec!["say k3y".to_owned(), "-UN".to_owned(), "IT\"<x> now".to_owned(), "fine".to_owned()];
        fragments(parts.iter_mut());
        assert_eq!(parts, ["say [redacted]", "", " now", "fine"]);
        assert!(!parts.concat().contains("k3y"));
    }

    #[test]
    fn secret_variables_are_known_by_their_names_or_by_being_marked() {
        for name in ["HF_TOKEN", "OPENAI_API_KEY", "hf_auth_header", "Db_Password", "AWS_SECRET_ACCESS_KEY", "KEY"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "CUDA_VISIBLE_DEVICES", "OLLAMA_HOST", "OMP_NUM_THREADS"] {
            assert!(!is_secret_name(name), "{name}");
        }
        let env: std::collections::BTreeMap<String, String> =
            [("HF_TOKEN", "hf_unit-secret-value-1"), ("MY_SETTING", "short1"), ("MODEL_KEY", "abc"), ("THREADS", "4")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let marked = vec!["MY_SETTING".to_owned()];
        register_variables(&env, &marked);
        assert_eq!(text("x hf_unit-secret-value-1 y short1 z"), "x [redacted] y [redacted] z");
        let shown = environment_for_record(&env, &marked);
        assert_eq!(shown["HF_TOKEN"], MARK);
        assert_eq!(shown["MY_SETTING"], MARK);
        assert_eq!(shown["MODEL_KEY"], MARK, "short, but secret by name: hidden where the environment is recorded");
        assert_eq!(shown["THREADS"], "4");
    }
}
