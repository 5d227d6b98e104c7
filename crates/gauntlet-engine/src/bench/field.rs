//! Workloads from the field (#34), the pure part: the prompts a Mooncake trace's hash ids stand for, synthetic
//! conversations, the prompt tokens each request shares with what was sent before it, and what a level measured
//! of lateness, per-turn TTFT and prefix-cache hits ([`summarize`]). Sends nothing (that is `run::field`).
//!
//! A prompt is made of words from [`WORDS`], each written with a leading space: a BPE tokenizer splits text at
//! spaces before it merges, so such a word that is one token alone is one token anywhere in the prompt, and a
//! block of `n` of them is exactly `n` tokens. Which words are one token is asked of the server's tokenizer when it
//! has one (`run::field`); then two requests sharing hash ids share exactly that many tokens.

use std::collections::HashMap;

use gauntlet_schema::bench::RequestRecord;
use gauntlet_schema::field::{
    CacheSummary, Conversation, FieldSummary, Lateness, Speaker, SyntheticShape, TraceRow, TurnSummary,
};

/// Common English words, most of them one token in the tokenizers of today's open models (checked per server).
pub const WORDS: &[&str] = &[
    "the", "house", "river", "green", "stone", "light", "water", "small", "city", "road", "tree", "bird", "table",
    "window", "music", "paper", "night", "market", "bread", "garden", "horse", "letter", "morning", "summer", "winter",
    "train", "field", "cloud", "friend", "story", "school", "money", "island", "mountain", "forest", "ocean", "voice",
    "silver", "yellow", "orange", "purple", "doctor", "teacher", "farmer", "kitchen", "bridge", "castle", "engine",
    "machine", "picture", "village", "harbor", "desert", "planet", "pocket", "coffee", "dinner", "corner", "number",
    "answer", "question", "simple", "quiet", "early",
];

/// A seeded generator (splitmix64): the same seed, the same words.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn key(parts: &[u64]) -> u64 {
    parts.iter().fold(0x243F_6A88_85A3_08D3, |acc, p| {
        let mut m = Mix(acc ^ p.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        m.next()
    })
}

/// `n` words, each with its leading space, drawn from `vocab` by a generator keyed by `parts`.
pub fn words(vocab: &[&str], parts: &[u64], n: u64) -> String {
    let mut rng = Mix(key(parts));
    let mut out = String::new();
    if vocab.is_empty() {
        return out;
    }
    for _ in 0..n {
        out.push(' ');
        out.push_str(vocab[(rng.next() % vocab.len() as u64) as usize]);
    }
    out
}

/// Tokens of block `k` of a row: `block` each, the last one what remains of its input.
fn block_len(row: &TraceRow, k: usize, block: u32) -> u64 {
    let before = k as u64 * u64::from(block);
    row.input_length.saturating_sub(before).min(u64::from(block))
}

/// The prompt of a trace row in replay `salt`: block `k` is the words of hash id `hash_ids[k]`, so rows sharing
/// leading hash ids share exactly that prefix (a shorter last block is a prefix of the full one). Each replay has
/// its own words (its `salt`), so that no replay finds the previous one's prompts in the server's cache.
pub fn trace_prompt(row: &TraceRow, block: u32, vocab: &[&str], seed: u64, salt: u64) -> String {
    let mut out = String::new();
    for (k, id) in row.hash_ids.iter().enumerate() {
        out.push_str(&words(vocab, &[seed, salt, *id], block_len(row, k, block)));
    }
    out
}

/// Per row, the prompt tokens it shares with the rows before it: its leading blocks that an earlier row had at the
/// same place after the same hash ids (a shorter block ends the shared part there).
pub fn trace_shared(rows: &[TraceRow], block: u32) -> Vec<u64> {
    // The longest block seen at the end of each prefix of hash ids (keyed by the prefix's digest).
    let mut seen: HashMap<u64, u64> = HashMap::new();
    rows.iter()
        .map(|row| {
            let mut shared = 0u64;
            let mut prefix = 0x5851_F42D_4C95_7F2Du64;
            let mut open = true;
            for (k, id) in row.hash_ids.iter().enumerate() {
                prefix = key(&[prefix, *id]);
                let len = block_len(row, k, block);
                if open {
                    match seen.get(&prefix) {
                        Some(&had) => {
                            shared += had.min(len);
                            open = had >= len;
                        }
                        None => open = false,
                    }
                }
                let e = seen.entry(prefix).or_insert(0);
                *e = (*e).max(len);
            }
            shared
        })
        .collect()
}

/// Synthetic conversations of batch `salt`: a system prompt (shared by the batch's conversations, when it has
/// words), then `turns` user turns, each answered in the history by a fixed assistant text.
pub fn synthetic(
    conversations: usize,
    turns: usize,
    shape: SyntheticShape,
    vocab: &[&str],
    seed: u64,
    salt: u64,
) -> Vec<Conversation> {
    let system = words(vocab, &[seed, salt, u64::MAX], u64::from(shape.system_words));
    (0..conversations as u64)
        .map(|c| {
            let mut conv: Conversation = Vec::new();
            if shape.system_words > 0 {
                conv.push((Speaker::System, system.trim_start().to_owned()));
            }
            for t in 0..turns as u64 {
                if t > 0 {
                    conv.push((
                        Speaker::Assistant,
                        words(vocab, &[seed, salt, c, t, 1], u64::from(shape.assistant_words)),
                    ));
                }
                conv.push((Speaker::User, words(vocab, &[seed, salt, c, t, 0], u64::from(shape.user_words))));
            }
            conv
        })
        .collect()
}

/// The messages of turn `turn` (0 first) of a conversation: everything up to and including its `turn`-th user
/// message; `None` past its last.
pub fn turn_messages(c: &Conversation, turn: usize) -> Option<&[(Speaker, String)]> {
    let mut seen = 0;
    for (i, (s, _)) in c.iter().enumerate() {
        if *s == Speaker::User {
            if seen == turn {
                return Some(&c[..=i]);
            }
            seen += 1;
        }
    }
    None
}

/// A request sent later than this behind its schedule is late: a replay with late requests measured the client
/// as much as the server.
pub const LATE_LIMIT: f64 = 0.010;

/// A cache block, in tokens, by server kind, with where the figure comes from: llama.cpp reuses a slot's common
/// prefix token by token; vLLM and SGLang cache whole blocks (pages) of their default size unless the server's
/// arguments say otherwise.
pub fn cache_block(kind: Option<&str>, arguments: &[String]) -> Option<(u32, String)> {
    let flag = |name: &str| {
        let i = arguments.iter().position(|a| a == name)?;
        arguments.get(i + 1)?.parse::<u32>().ok().filter(|n| *n > 0)
    };
    match kind? {
        "llama.cpp" => Some((1, "llama.cpp reuses a slot's common prefix token by token".into())),
        "vllm" => Some(match flag("--block-size") {
            Some(n) => (n, "the server's --block-size".into()),
            None => (16, "vLLM's default block size (no --block-size given)".into()),
        }),
        "sglang" => Some(match flag("--page-size") {
            Some(n) => (n, "the server's --page-size".into()),
            None => (1, "SGLang's default page size (no --page-size given)".into()),
        }),
        _ => None,
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

/// A request's TTFT: its first event with text, in seconds after it was sent.
fn ttft(r: &RequestRecord) -> Option<f64> {
    if r.error.is_some() {
        return None;
    }
    r.events.iter().find(|(_, c, re)| !c.is_empty() || !re.is_empty()).map(|(t, _, _)| *t)
}

/// Sums a level's measured requests up: lateness (a replay), per-turn TTFT and tokens (conversations), and the
/// prefix cache's measured hit rate beside the workload's expected one; `block` is the server's cache block.
pub fn summarize(requests: &[RequestRecord], block: Option<(u32, String)>, prefix: &str) -> FieldSummary {
    let mut s = FieldSummary { prefix: prefix.to_owned(), ..Default::default() };
    let mut late: Vec<f64> = requests.iter().filter_map(|r| r.lateness).filter(|l| l.is_finite()).collect();
    if !late.is_empty() {
        late.sort_by(f64::total_cmp);
        let n = late.iter().filter(|l| **l > LATE_LIMIT).count() as u64;
        let l = Lateness {
            requests: late.len() as u64,
            p50: percentile(&late, 0.5),
            p99: percentile(&late, 0.99),
            max: late[late.len() - 1],
            late: n,
            limit: LATE_LIMIT,
        };
        if n > 0 {
            s.notes.push(format!(
                "the client sent {n} of {} request(s) more than {:.0} ms behind the trace's schedule (at worst {:.1} \
                 ms): their times measure the client as much as the server",
                l.requests,
                LATE_LIMIT * 1e3,
                l.max * 1e3
            ));
        }
        s.lateness = Some(l);
    }
    let turns = requests.iter().filter_map(|r| r.turn).max();
    if let Some(most) = turns {
        for t in 0..=most {
            let of: Vec<&RequestRecord> = requests.iter().filter(|r| r.turn == Some(t)).collect();
            let mut times: Vec<f64> = of.iter().filter_map(|r| ttft(r)).collect();
            times.sort_by(f64::total_cmp);
            s.turns.push(TurnSummary {
                turn: t,
                requests: of.len() as u64,
                ttft_mean: (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64),
                ttft_p50: (!times.is_empty()).then(|| percentile(&times, 0.5)),
                prompt_tokens: of.iter().filter_map(|r| r.prompt_tokens).sum(),
                cached_tokens: of.iter().filter_map(|r| r.cached_tokens).sum(),
            });
        }
    }
    let answered: Vec<&RequestRecord> = requests.iter().filter(|r| r.error.is_none()).collect();
    let reported: Vec<&&RequestRecord> =
        answered.iter().filter(|r| r.cached_tokens.is_some() && r.prompt_tokens.is_some()).collect();
    let prompt: u64 = reported.iter().filter_map(|r| r.prompt_tokens).sum();
    let cached: u64 = reported.iter().filter_map(|r| r.cached_tokens).sum();
    // The expected rate over the same requests, each one's shared tokens bounded by its prompt.
    let expected: Option<u64> =
        reported.iter().map(|r| Some(r.expected_cached?.min(r.prompt_tokens.unwrap_or(0)))).sum::<Option<u64>>();
    let rate = |n: u64| (prompt > 0).then(|| n as f64 / prompt as f64);
    if reported.len() < answered.len() {
        s.notes.push(format!(
            "{} of {} answered request(s) did not say how many prompt tokens came from the server's cache: the \
             measured hit rate counts the others",
            answered.len() - reported.len(),
            answered.len()
        ));
    }
    let shortest = requests.iter().filter_map(|r| r.expected_cached).filter(|n| *n > 0).min();
    if let (Some((b, _)), Some(n)) = (&block, shortest)
        && n < u64::from(*b)
    {
        s.notes.push(format!(
            "the workload's shortest shared prefix ({n} tokens) is shorter than the server's cache block ({b} \
             tokens): a cache of whole blocks reuses none of it"
        ));
    }
    s.cache = Some(CacheSummary {
        reported: reported.len() as u64,
        answered: answered.len() as u64,
        prompt_tokens: prompt,
        cached_tokens: cached,
        measured_rate: rate(cached),
        expected_rate: expected.and_then(rate),
        block: block.as_ref().map(|(b, _)| *b),
        block_source: block.map(|(_, why)| why).unwrap_or_default(),
    });
    s
}

/// A field level's summary in `bench.md`: lateness, per-turn TTFT and tokens, the measured and expected hit rates,
/// and its notes; empty for any other level. Every text from the record is cleaned (a record is untrusted).
pub fn markdown(level: &gauntlet_schema::bench::Level) -> String {
    use std::fmt::Write;
    let Some(v) = level.metrics.get("field") else { return String::new() };
    let Ok(s) = serde_json::from_value::<gauntlet_schema::field::FieldSummary>(v.clone()) else { return String::new() };
    let clean = |t: &str| crate::util::clean::line(t);
    let ms = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{:.1}", x * 1e3));
    let pct = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{:.1} %", x * 100.0));
    let mut md =
        format!("\n## Field workload (concurrency {})\n\n- Prefixes: {}\n", level.concurrency, clean(&s.prefix));
    if let Some(l) = &s.lateness {
        let _ = writeln!(
            md,
            "- Lateness (sent behind the trace's schedule): p50 {} ms, p99 {} ms, max {} ms; {} of {} over {} ms",
            ms(Some(l.p50)),
            ms(Some(l.p99)),
            ms(Some(l.max)),
            l.late,
            l.requests,
            ms(Some(l.limit))
        );
    }
    if let Some(c) = &s.cache {
        let block = c.block.map_or("unknown".to_owned(), |b| format!("{b} token(s), {}", clean(&c.block_source)));
        let _ = writeln!(
            md,
            "- Prefix cache: measured {} ({} of {} prompt tokens, {} of {} answers reporting), expected {}; cache block {}",
            pct(c.measured_rate),
            c.cached_tokens,
            c.prompt_tokens,
            c.reported,
            c.answered,
            pct(c.expected_rate),
            block
        );
    }
    if !s.turns.is_empty() {
        md.push_str("\n| turn | requests | TTFT mean ms | TTFT p50 ms | prompt tokens | cached tokens |\n|---:|---:|---:|---:|---:|---:|\n");
        for t in &s.turns {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                t.turn,
                t.requests,
                ms(t.ttft_mean),
                ms(t.ttft_p50),
                t.prompt_tokens,
                t.cached_tokens
            );
        }
    }
    for n in &s.notes {
        let _ = writeln!(md, "- Note: {}", clean(n));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: usize, input: u64, ids: &[u64]) -> TraceRow {
        TraceRow { line, timestamp_ms: 0, input_length: input, output_length: 1, hash_ids: ids.to_vec() }
    }

    #[test]
    fn rows_sharing_hash_ids_share_exactly_that_prefix_and_nothing_more() {
        let vocab = &WORDS[..16];
        let rows = [row(1, 20, &[1, 2, 3]), row(2, 16, &[1, 2]), row(3, 24, &[1, 9, 3]), row(4, 8, &[7])];
        let p: Vec<String> = rows.iter().map(|r| trace_prompt(r, 8, vocab, 5, 0)).collect();
        let n = |s: &str| s.split(' ').filter(|w| !w.is_empty()).count() as u64;
        for (r, s) in rows.iter().zip(&p) {
            assert_eq!(n(s), r.input_length, "{s}");
        }
        let common = |a: &str, b: &str| {
            a.split(' ').zip(b.split(' ')).take_while(|(x, y)| x == y).filter(|(x, _)| !x.is_empty()).count() as u64
        };
        // Row 2 is row 1's first two blocks; row 3 shares row 1's first block only; row 4 nothing. Words repeat
        // within 16, so a chance match of a word or two past the shared blocks is possible: never a whole block.
        assert_eq!(common(&p[0], &p[1]), 16);
        assert!((8..10).contains(&common(&p[0], &p[2])), "{}", common(&p[0], &p[2]));
        assert!(common(&p[0], &p[3]) < 3);
        assert_eq!(trace_shared(&rows, 8), vec![0, 16, 8, 0]);
        // A partial last block shared by a longer row counts only its length; another replay has other words.
        assert_eq!(trace_shared(&[row(1, 12, &[1, 2]), row(2, 16, &[1, 2])], 8), vec![0, 12]);
        assert_ne!(trace_prompt(&rows[0], 8, vocab, 5, 1), p[0]);
    }

    #[test]
    fn synthetic_conversations_carry_every_earlier_turn() {
        let shape = SyntheticShape { system_words: 4, user_words: 3, assistant_words: 2 };
        let c = synthetic(2, 3, shape, WORDS, 1, 0);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0][0].1, c[1][0].1, "the batch's conversations share the system prompt");
        assert_ne!(c[0][1].1, c[1][1].1);
        let t2 = turn_messages(&c[0], 2).unwrap();
        assert_eq!(t2.len(), 6, "system, u0, a0, u1, a1, u2");
        assert_eq!(t2[..4], turn_messages(&c[0], 1).unwrap()[..4]);
        assert!(turn_messages(&c[0], 3).is_none());
        assert_ne!(synthetic(1, 1, shape, WORDS, 1, 1)[0], c[0][..2].to_vec(), "another batch, other words");
    }

    #[test]
    fn a_summary_puts_the_measured_hit_rate_beside_the_expected_and_names_a_late_client() {
        let req = |turn: u32, prompt: u64, cached: u64, expected: u64, late: f64| RequestRecord {
            events: vec![(0.05 * (turn + 1) as f64, "x".into(), String::new())],
            turn: Some(turn),
            prompt_tokens: Some(prompt),
            cached_tokens: Some(cached),
            expected_cached: Some(expected),
            lateness: Some(late),
            ..Default::default()
        };
        let rs = [req(0, 40, 0, 0, 0.001), req(1, 80, 39, 40, 0.002), req(2, 120, 79, 80, 0.5)];
        let s = summarize(&rs, Some((16, "vLLM's default block size".into())), "token-exact");
        let c = s.cache.clone().unwrap();
        assert_eq!((c.prompt_tokens, c.cached_tokens, c.reported), (240, 118, 3));
        assert!((c.expected_rate.unwrap() - 0.5).abs() < 1e-12);
        assert!((c.measured_rate.unwrap() - 118.0 / 240.0).abs() < 1e-12);
        assert_eq!(s.turns.len(), 3);
        assert!((s.turns[2].ttft_mean.unwrap() - 0.15).abs() < 1e-12);
        let l = s.lateness.clone().unwrap();
        assert_eq!((l.late, l.max), (1, 0.5));
        assert!(s.notes[0].contains("1 of 3 request(s) more than 10 ms behind"), "{:?}", s.notes);
        // A shared prefix shorter than a block is said.
        let short = [req(0, 40, 0, 0, 0.0), req(1, 48, 0, 8, 0.0)];
        let s = summarize(&short, Some((16, "b".into())), "");
        assert!(s.notes.iter().any(|n| n.contains("(8 tokens) is shorter than the server's cache block (16")));
        assert!(summarize(&short, Some((1, "b".into())), "").notes.is_empty());
    }

    #[test]
    fn the_cache_block_comes_from_the_kind_and_its_arguments() {
        assert_eq!(cache_block(Some("llama.cpp"), &[]).unwrap().0, 1);
        assert_eq!(cache_block(Some("vllm"), &[]).unwrap().0, 16);
        let args = ["--block-size".to_owned(), "32".to_owned()];
        assert_eq!(cache_block(Some("vllm"), &args).unwrap().0, 32);
        assert!(cache_block(Some("tgi"), &[]).is_none() && cache_block(None, &[]).is_none());
    }
}
