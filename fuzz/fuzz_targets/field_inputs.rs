//! The field workloads' readers (#34): a Mooncake trace (`manifest::parse_mooncake`, the block size from the first
//! byte) and a ShareGPT file (`manifest::parse_sharegpt`); a trace that reads has its shared prefixes computed and
//! its short rows' prompts built, which must be exactly their input length in words.
#![no_main]

use gauntlet_engine::bench::field;
use gauntlet_engine::manifest::{parse_mooncake, parse_sharegpt};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let block = u32::from(*first % 64) + 1;
    if let Ok(rows) = parse_mooncake(text, block) {
        let shared = field::trace_shared(&rows, block);
        assert_eq!(shared.len(), rows.len());
        for (row, s) in rows.iter().zip(shared).take(8) {
            assert!(s <= row.input_length, "a row shares at most its input");
            if row.input_length <= 4096 {
                let prompt = field::trace_prompt(row, block, field::WORDS, 1, 0);
                assert_eq!(prompt.split_whitespace().count() as u64, row.input_length);
            }
        }
    }
    if let Ok(convs) = parse_sharegpt(text) {
        for c in &convs {
            assert!(field::turn_messages(c, 0).is_some(), "a conversation read has a user turn");
        }
    }
});
