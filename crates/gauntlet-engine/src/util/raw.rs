//! Raw JSON a server sent, bounded before gauntlet keeps it in a record (a completion's `timings`, a tool call's
//! arguments, a server's `/props`): what gauntlet writes it must read back, and a reader stops at 128 levels of
//! nesting. A server's value may already be 126 deep (it parsed), and a record nests it a few levels deeper still.
//! Every raw value a record keeps goes through [`cap`]; nothing here ever fails or panics.

use serde_json::Value;

/// The deepest a kept raw value nests (its outermost array or object is level 1): far below the reader's 128, with
/// room for the record around it, and deeper than any engine's real `timings` or tool arguments.
pub const MAX_RAW_DEPTH: usize = 32;
/// The most bytes of JSON one kept raw value takes (as much as a streamed tool call's arguments may).
pub const MAX_RAW_BYTES: usize = 1 << 20;

/// What stands for an array or object deeper than [`MAX_RAW_DEPTH`].
pub const DEEP_MARKER: &str = "[gauntlet: nested deeper than 32 levels, dropped]";

/// `v` bounded for keeping: every array or object below [`MAX_RAW_DEPTH`] levels becomes [`DEEP_MARKER`], and a
/// value whose JSON then takes more than [`MAX_RAW_BYTES`] becomes the string
/// `[gauntlet: N bytes of JSON, over the 1048576-byte cap, dropped]`.
pub fn cap(v: Value) -> Value {
    let v = cap_depth(v, 1);
    let mut count = Count(0);
    if serde_json::to_writer(&mut count, &v).is_err() || count.0 > MAX_RAW_BYTES {
        return Value::String(format!(
            "[gauntlet: {} bytes of JSON, over the {MAX_RAW_BYTES}-byte cap, dropped]",
            count.0
        ));
    }
    v
}

fn cap_depth(v: Value, depth: usize) -> Value {
    match v {
        Value::Array(_) | Value::Object(_) if depth > MAX_RAW_DEPTH => Value::String(DEEP_MARKER.into()),
        Value::Array(items) => Value::Array(items.into_iter().map(|x| cap_depth(x, depth + 1)).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, x)| (k, cap_depth(x, depth + 1))).collect()),
        other => other,
    }
}

/// Counts the bytes written to it (stops counting past the cap: the size is then only known to be over it).
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        if self.0 > MAX_RAW_BYTES {
            return Err(std::io::Error::other("over the cap"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How deep `v` nests (a scalar is 0, `[]` is 1).
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(n: usize) -> Value {
        (0..n).fold(json!(1), |inner, _| json!({ "a": inner }))
    }

    #[test]
    fn deep_values_are_cut_at_the_depth_cap_and_shallow_ones_kept_whole() {
        let kept = nested(MAX_RAW_DEPTH);
        assert_eq!(cap(kept.clone()), kept);
        let cut = cap(nested(126));
        assert_eq!(depth(&cut), MAX_RAW_DEPTH);
        let mut at = &cut;
        for _ in 0..MAX_RAW_DEPTH {
            at = &at["a"];
        }
        assert_eq!(at, DEEP_MARKER);
        // Nested in a record 4 levels deeper, it still reads back.
        let record = json!({"cases": [{"answer": {"server_timings": cut}}]});
        let text = serde_json::to_string(&record).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }

    #[test]
    fn large_values_become_a_marker_with_their_size() {
        let big = json!({"x": "y".repeat(MAX_RAW_BYTES)});
        let capped = cap(big);
        let text = capped.as_str().unwrap_or_default();
        assert!(text.starts_with("[gauntlet: ") && text.ends_with("over the 1048576-byte cap, dropped]"), "{text}");
        let small = json!({"x": "y".repeat(1000)});
        assert_eq!(cap(small.clone()), small);
    }
}
