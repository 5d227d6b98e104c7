//! The kernel-log path (`sentry`): records in `/dev/kmsg`'s text form read through the run's bracket (sequence
//! bookkeeping, dictionary lines, unescaping), then classified by the embedded patterns together with the
//! server's stderr, as `sentry::assess` does after every run.
//!
//! Input: kmsg records, one per line (` KEY=VALUE` continuation lines belong to the record above), where the line
//! `!EPIPE` is an overwritten stretch, `!PAUSE` the end of what is there before the server starts (the rest
//! arrives during the run) and `!FAIL` a read error; then, after a line `!STDERR`, the server's stderr.
#![no_main]

use std::path::Path;

use gauntlet_engine::sentry::kmsg::{Bracket, Read, Source};
use gauntlet_engine::sentry::{Ours, assess};
use libfuzzer_sys::fuzz_target;

struct Memory {
    reads: std::vec::IntoIter<Read>,
}

impl Memory {
    fn new(text: &[u8]) -> Memory {
        let mut reads = Vec::new();
        let mut record: Option<Vec<u8>> = None;
        for line in text.split_inclusive(|b| *b == b'\n') {
            if line.starts_with(b" ") {
                if let Some(r) = &mut record {
                    r.extend_from_slice(line);
                    continue;
                }
            }
            if let Some(r) = record.take() {
                reads.push(Read::Record(r));
            }
            match line.strip_suffix(b"\n").unwrap_or(line) {
                b"!EPIPE" => reads.push(Read::Lost),
                b"!PAUSE" => reads.push(Read::Empty),
                b"!FAIL" => reads.push(Read::Failed("fuzz: read failed".into())),
                _ => record = Some(line.to_vec()),
            }
        }
        reads.extend(record.map(Read::Record));
        Memory { reads: reads.into_iter() }
    }
}

impl Source for Memory {
    fn read(&mut self) -> Read {
        self.reads.next().unwrap_or(Read::Empty)
    }

    fn wait(&mut self, _timeout: std::time::Duration) {
        std::thread::yield_now();
    }
}

fuzz_target!(|data: &[u8]| {
    let (kmsg, stderr) = match data.windows(8).position(|w| w == b"!STDERR\n") {
        Some(at) => (&data[..at], &data[at + 8..]),
        None => (data, &data[data.len()..]),
    };
    let bracket = Bracket::start(Box::new(Memory::new(kmsg)), Path::new("/nonexistent/gauntlet-fuzz-boot-id"));
    let observed = bracket.finish(std::time::Duration::ZERO);
    let ours = Ours {
        pids: vec![1234, 4242],
        names: vec!["llama-server".into(), "VLLM::Worker".into()],
        bdf: Some("0000:01:00.0".into()),
        on_gpu: true,
    };
    let stderr = String::from_utf8_lossy(stderr);
    let (record, _findings) = assess(Ok(&observed), &stderr, &ours);
    serde_json::to_string(&record).expect("a sentry record serializes");
    let _ = assess(Err("fuzz: blind"), &stderr, &Ours::default());
});
