//! The quality floor's material: a built-in, versioned set of grade-school arithmetic word problems with exact
//! answers (seeded, so one `(version, seed, count)` always gives the same set), a reader for external sets in
//! GSM8K's JSONL format, and the answer extraction used to score a model's reply.

use serde::{Deserialize, Serialize};

use crate::bench::stats::Rng;

/// The generator's version. Any change to templates, names or number ranges bumps it: a set is identified by
/// `arith-v{VERSION}`, its seed and its count, and two runs with the same triple must see the same problems.
pub const ARITH_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub id: String,
    pub question: String,
    /// The exact answer, as the number a person would write.
    pub gold: String,
    /// Which template made it (`add`, `take`, `groups`, `share`, `packs`, `change`); empty for external sets.
    #[serde(default)]
    pub kind: String,
}

const NAMES: [&str; 12] =
    ["Ava", "Ben", "Chloe", "Daniel", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jamal", "Keiko", "Liam"];
const ITEMS: [&str; 10] =
    ["apples", "marbles", "stickers", "pencils", "cookies", "stamps", "books", "shells", "cards", "balloons"];

/// `count` problems of the built-in set for `seed`. Every answer is a non-negative integer.
pub fn arithmetic(seed: u64, count: usize) -> Vec<Problem> {
    let mut rng = Rng::new(seed ^ 0x5eed_a817_0000_0001);
    let mut pick = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
    (0..count)
        .map(|i| {
            let name = NAMES[pick(0, NAMES.len() as u64 - 1) as usize];
            let item = ITEMS[pick(0, ITEMS.len() as u64 - 1) as usize];
            let (kind, question, gold) = match pick(0, 5) {
                0 => {
                    let (a, b) = (pick(3, 60), pick(2, 40));
                    ("add", format!("{name} has {a} {item}. {name} gets {b} more {item}. How many {item} does {name} have now?"), a + b)
                }
                1 => {
                    let (a, b) = (pick(20, 90), pick(2, 19));
                    ("take", format!("{name} had {a} {item} and gave {b} of them to a friend. How many {item} does {name} have left?"), a - b)
                }
                2 => {
                    let (a, b) = (pick(2, 9), pick(2, 12));
                    ("groups", format!("{name} buys {a} boxes. Each box holds {b} {item}. How many {item} did {name} buy in total?"), a * b)
                }
                3 => {
                    let (a, b) = (pick(2, 12), pick(2, 8));
                    let total = a * b;
                    ("share", format!("{name} shares {total} {item} equally among {b} friends. How many {item} does each friend get?"), a)
                }
                4 => {
                    let (a, b, c) = (pick(1, 30), pick(2, 6), pick(2, 10));
                    ("packs", format!("{name} has {a} {item} and buys {b} packs with {c} {item} in each pack. How many {item} does {name} have now?"), a + b * c)
                }
                _ => {
                    let (price, n) = (pick(2, 9), pick(2, 6));
                    let paid = (price * n).div_ceil(10) * 10 + 10 * pick(0, 2);
                    ("change", format!("{name} buys {n} {item} that cost {price} dollars each and pays with {paid} dollars. How many dollars of change does {name} get?"), paid - price * n)
                }
            };
            Problem { id: format!("arith-{i:04}"), question, gold: gold.to_string(), kind: kind.into() }
        })
        .collect()
}

/// An external set in GSM8K's JSONL format: one `{"question": ..., "answer": "... #### 42"}` per line. The gold
/// answer is the number after the last `####`. Every bad line is reported with its number.
pub fn read_gsm8k(text: &str) -> Result<Vec<Problem>, Vec<String>> {
    let mut problems = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("line {}: not JSON: {e}", n + 1));
                continue;
            }
        };
        let (Some(q), Some(a)) = (v["question"].as_str(), v["answer"].as_str()) else {
            errors.push(format!("line {}: needs string fields `question` and `answer`", n + 1));
            continue;
        };
        let Some(gold) = a.rsplit_once("####").and_then(|(_, g)| normalise_number(g.trim())) else {
            errors.push(format!("line {}: `answer` has no number after `####`", n + 1));
            continue;
        };
        let id = v["id"].as_str().map(str::to_owned).unwrap_or_else(|| format!("line-{}", n + 1));
        problems.push(Problem { id, question: q.to_owned(), gold, kind: String::new() });
    }
    if problems.is_empty() && errors.is_empty() {
        errors.push("the set is empty".into());
    }
    if errors.is_empty() { Ok(problems) } else { Err(errors) }
}

/// How an answer was found, in the order tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Extraction {
    Marker,
    Boxed,
    AnswerIs,
    Bold,
    LastNumber,
}

/// The model's final answer: only the text after the last `</think>` counts, then the first of `#### N`,
/// `\boxed{N}`, "answer is N", `**N**`, and the last number in the text.
pub fn extract_answer(reply: &str) -> Option<(String, Extraction)> {
    let text = reply.rsplit_once("</think>").map_or(reply, |(_, after)| after);
    let patterns = &*ANSWER_PATTERNS;
    for (how, re) in &patterns.tries {
        if let Some(n) = re.captures_iter(text).last().and_then(|c| normalise_number(&c[1])) {
            return Some((n, *how));
        }
    }
    patterns
        .number
        .find_iter(text)
        .filter_map(|m| normalise_number(m.as_str()))
        .last()
        .map(|n| (n, Extraction::LastNumber))
}

/// The answer patterns, compiled once per process (compiling them per answer was most of `verify`'s time).
struct AnswerPatterns {
    tries: [(Extraction, regex::Regex); 4],
    number: regex::Regex,
}

static ANSWER_PATTERNS: std::sync::LazyLock<AnswerPatterns> = std::sync::LazyLock::new(|| {
    let number = r"(-?\$?\s*[0-9][0-9,]*(?:\.[0-9]+)?)";
    let re = |p: String| regex::Regex::new(&p).expect("static pattern");
    AnswerPatterns {
        tries: [
            (Extraction::Marker, re(format!(r"####\s*{number}"))),
            (Extraction::Boxed, re(format!(r"\\boxed\{{\s*{number}"))),
            (Extraction::AnswerIs, re(format!(r"(?i)answer\s+is\s*:?\s*{number}"))),
            (Extraction::Bold, re(format!(r"\*\*\s*{number}\s*\*\*"))),
        ],
        number: re(number.to_owned()),
    }
});

/// `$1,200.50` → `1200.5`; `42.` → `42`; `-3` → `-3`. None when no number is left.
pub fn normalise_number(s: &str) -> Option<String> {
    let cleaned: String = s.chars().filter(|c| !matches!(c, '$' | ',' | ' ')).collect();
    let cleaned = cleaned.trim_end_matches('.');
    let x: f64 = cleaned.parse().ok()?;
    if !x.is_finite() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 1e15 { Some(format!("{}", x as i64)) } else { Some(format!("{x}")) }
}

/// Is `reply`'s extracted answer the gold one?
pub fn is_correct(reply: &str, gold: &str) -> bool {
    match (extract_answer(reply), normalise_number(gold)) {
        (Some((got, _)), Some(want)) => got == want,
        _ => false,
    }
}
