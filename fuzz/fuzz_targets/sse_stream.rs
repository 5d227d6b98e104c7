//! The SSE stream parser (`client::StreamAssembler`): server bytes, cut into chunks the way a socket may deliver
//! them. The first byte picks the chunk size; the rest is the stream. Besides never panicking, the answer must not
//! depend on where the chunks were cut: the same bytes fed whole give the same result.
#![no_main]

use gauntlet_engine::client::StreamAssembler;
use libfuzzer_sys::fuzz_target;

fn assemble(stream: &[u8], chunk: usize) -> Result<gauntlet_schema::Answer, String> {
    let mut s = StreamAssembler::default();
    for (i, part) in stream.chunks(chunk).enumerate() {
        s.feed(part, i as f64).map_err(|e| e.to_string())?;
        if s.done() {
            break;
        }
    }
    s.finish().map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else { return };
    let chunk = usize::from(first % 64) + 1;
    let cut = assemble(stream, chunk);
    let whole = assemble(stream, stream.len().max(1));
    match (&cut, &whole) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.content, b.content);
            assert_eq!(a.reasoning, b.reasoning);
            assert_eq!(a.finish_reason, b.finish_reason);
            assert_eq!(a.usage, b.usage);
            assert_eq!(a.server_timings, b.server_timings);
            let texts = |x: &gauntlet_schema::Answer| -> Vec<(String, String)> {
                x.timeline.iter().map(|e| (e.content.clone(), e.reasoning.clone())).collect()
            };
            assert_eq!(texts(a), texts(b));
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("chunking changed the outcome: cut {cut:?}, whole {whole:?}"),
    }
});
