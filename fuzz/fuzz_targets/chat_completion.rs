//! The chat-completion reader (`client::parse_completion`): a non-streamed answer's body, as JSON.
#![no_main]

use gauntlet_engine::client::parse_completion;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    if let Ok(answer) = parse_completion(&v) {
        // What the run record keeps of an answer must serialize.
        serde_json::to_string(&answer).expect("an answer serializes");
    }
});
