//! "Did you mean …?" for a key that is not known: the closest known key, when one is close enough to be a typo.
//! It only suggests; it never decides that an unknown key is acceptable.

/// The known key that `key` most likely misspells: the same key up to case and `_`/`-`, else the nearest one
/// within an edit distance of 2 (ties: the first in `known`), else the only known key it is a prefix of (4
/// characters or more). `None` when nothing is that close.
pub fn did_you_mean<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let wanted = norm(key);
    if let Some(k) = known.iter().find(|k| norm(k) == wanted) {
        return Some(k);
    }
    // Keys are short; a key far longer than every known one is not a typo of any (and would cost time).
    if key.chars().count() > 64 {
        return None;
    }
    let near = known.iter().map(|k| (distance(&wanted, &norm(k)), *k)).filter(|(d, _)| *d <= 2).min_by_key(|(d, _)| *d);
    if let Some((_, k)) = near {
        return Some(k);
    }
    // A shortened key (`min_pass` for `min_pass_rate`), when only one known key starts that way.
    let mut longer = known.iter().filter(|k| wanted.len() >= 4 && norm(k).starts_with(&wanted));
    match (longer.next(), longer.next()) {
        (Some(k), None) => Some(k),
        _ => None,
    }
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The message for an unknown key: with the suggestion when there is one.
pub fn unknown_key_message(key: &str, known: &[&str]) -> String {
    match did_you_mean(key, known) {
        Some(k) => format!("unknown key; did you mean `{k}`?"),
        None => format!("unknown key (known here: {})", known.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_keys_are_suggested_and_far_ones_are_not() {
        let known = ["request_timeout", "load_timeout", "stop_grace", "base_url"];
        assert_eq!(did_you_mean("request_timout", &known), Some("request_timeout"));
        assert_eq!(did_you_mean("Request-Timeout", &known), Some("request_timeout"));
        assert_eq!(did_you_mean("laod_timeout", &known), Some("load_timeout"));
        assert_eq!(did_you_mean("base-url", &known), Some("base_url"));
        assert_eq!(did_you_mean("colour", &known), None);
        assert_eq!(did_you_mean("stop", &known), Some("stop_grace"));
        assert_eq!(did_you_mean("load", &["load_timeout", "load_ratio_warn"]), None);
        assert_eq!(did_you_mean(&"x".repeat(10_000), &known), None);
    }
}
