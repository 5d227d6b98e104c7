//! The bench's spill file: every measured request's record goes to `requests.jsonl` in the bench's folder as its
//! batch ends (through a buffered writer, flushed per batch), so that a long bench holds the numbers its statistics
//! need ([`crate::bench::metrics::Pool`]), not every request's events. The file has a cap ([`SPILL_CAP`]): past
//! it records are counted as dropped, not written. `bench.json` still carries the requests: they are streamed from
//! this file into it, one at a time, when it is written, and so are the HTML's latency distributions.
//!
//! The file is read back as untrusted input (it is a file on disk that anything could have changed): a regular
//! file only, a cap on the bytes read and on each line, lines that do not parse or are out of place skipped.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use gauntlet_schema::bench::{BenchRecord, RequestRecord, Spill as SpillRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::util::redact;

/// The spill file's name in the bench's folder.
pub const SPILL_FILE: &str = "requests.jsonl";

/// Bytes the spill file may hold (and that are read back from it). A request of 32 tokens takes about 1.3 KB, so
/// this is some 50 000 of them; `bench.json`, which carries them again, stays readable under
/// [`crate::util::bounded::RECORD_CAP`].
pub const SPILL_CAP: u64 = 64 << 20;

/// The longest line read back: a request's record is at most its capped text plus its events' times, and its
/// events are bounded by the response cap (8 MiB at most), about 30 bytes of record per event.
const LINE_CAP: usize = 16 << 20;

#[derive(Serialize)]
struct LineOut<'a> {
    concurrency: usize,
    batch: usize,
    request: &'a RequestRecord,
}

#[derive(Deserialize)]
struct Line {
    concurrency: usize,
    batch: usize,
    request: RequestRecord,
}

/// The writer of a bench's spill file.
pub(crate) struct Spill {
    out: Option<BufWriter<File>>,
    cap: u64,
    bytes: u64,
    records: u64,
    dropped: u64,
    error: Option<String>,
}

impl Spill {
    /// A new, empty spill file in `dir` (created if need be), capped at [`SPILL_CAP`].
    pub(crate) fn create(dir: &Path) -> io::Result<Spill> {
        Spill::with_cap(dir, SPILL_CAP)
    }

    pub(crate) fn with_cap(dir: &Path, cap: u64) -> io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(SPILL_FILE);
        // A fresh file, never one reached through a link left in its place.
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)?;
        Ok(Spill { out: Some(BufWriter::new(file)), cap, bytes: 0, records: 0, dropped: 0, error: None })
    }

    /// Writes the records of batch `batch` (counted among the measured batches of `concurrency`), then flushes, so
    /// that an interrupted bench leaves every finished batch on disk.
    pub(crate) fn batch(&mut self, concurrency: usize, batch: usize, requests: Vec<RequestRecord>) {
        for request in &requests {
            self.write(&LineOut { concurrency, batch, request });
        }
        drop(requests);
        if let Some(out) = &mut self.out
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
    }

    fn write(&mut self, line: &LineOut) {
        let Some(out) = &mut self.out else {
            self.dropped += 1;
            return;
        };
        let text = serde_json::to_vec(line).expect("serializable");
        let text = redact::bytes(&text);
        let len = text.len() as u64 + 1;
        if self.bytes.saturating_add(len) > self.cap {
            self.dropped += 1;
            return;
        }
        if let Err(e) = out.write_all(&text).and_then(|()| out.write_all(b"\n")) {
            self.dropped += 1;
            return self.fail(e);
        }
        self.bytes += len;
        self.records += 1;
    }

    /// A write failed: the records from here on are dropped (counted), the bench goes on.
    fn fail(&mut self, e: io::Error) {
        self.out = None;
        self.error.get_or_insert_with(|| format!("writing {SPILL_FILE}: {e}"));
    }

    /// Flushes the file and says what it holds.
    pub(crate) fn finish(mut self) -> SpillRecord {
        if let Some(out) = &mut self.out
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
        SpillRecord {
            file: SPILL_FILE.into(),
            cap_bytes: self.cap,
            records: self.records,
            dropped: self.dropped,
            error: self.error,
        }
    }
}

/// Reads a spill file back, record by record, within [`SPILL_CAP`] bytes and [`LINE_CAP`] per line.
struct Reader {
    input: BufReader<File>,
    left: u64,
    line: Vec<u8>,
    /// Lines that were not a record (too long, not JSON of the right shape).
    skipped: u64,
}

impl Reader {
    fn open(dir: &Path, spilled: &SpillRecord) -> Result<Reader, String> {
        // The record names the file: only a plain name inside the bench's folder.
        let name = spilled.file.as_str();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(format!("the spill file's name {name:?} is not a file name in the bench's folder"));
        }
        let path = dir.join(name);
        let (file, _) = crate::util::bounded::open_regular(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Reader { input: BufReader::new(file), left: SPILL_CAP, line: Vec::new(), skipped: 0 })
    }

    /// The next record, or `None` at the end of the file, of the cap, or at a read error.
    fn next(&mut self) -> Option<Line> {
        loop {
            self.line.clear();
            let limit = self.left.min(LINE_CAP as u64 + 1);
            let n = (&mut self.input).take(limit).read_until(b'\n', &mut self.line).ok()?;
            if n == 0 {
                return None;
            }
            self.left -= n as u64;
            if self.line.last() != Some(&b'\n') && n as u64 == limit {
                // Longer than a line may be (or the cap cut it): skip to its end.
                self.skipped += 1;
                if !self.skip_line() {
                    return None;
                }
                continue;
            }
            match serde_json::from_slice::<Line>(&self.line) {
                Ok(line) => return Some(line),
                Err(_) => self.skipped += 1,
            }
        }
    }

    /// Discards up to the next newline; false when the file or the cap ended first.
    fn skip_line(&mut self) -> bool {
        loop {
            let Ok(buf) = self.input.fill_buf() else { return false };
            if buf.is_empty() || self.left == 0 {
                return false;
            }
            let room = usize::try_from(self.left).unwrap_or(usize::MAX).min(buf.len());
            let (used, found) = match buf[..room].iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (room, false),
            };
            self.input.consume(used);
            self.left -= used as u64;
            if found {
                return true;
            }
        }
    }
}

/// Every spilled request of `concurrency`, one at a time, in the file's order (none when the file cannot be read).
pub(crate) fn each_request(dir: &Path, spilled: &SpillRecord, concurrency: usize, f: &mut dyn FnMut(&RequestRecord)) {
    let Ok(mut reader) = Reader::open(dir, spilled) else { return };
    while let Some(line) = reader.next() {
        if line.concurrency == concurrency {
            f(&line.request);
        }
    }
}

/// Writes `bench.json` atomically, with every batch's requests streamed from the spill file in `dir` (the record's
/// own batches hold none): one record in memory at a time. A spill line that does not belong where it stands is
/// skipped; one that is missing leaves its batch shorter (the record's `spill` counts the dropped ones).
pub(crate) fn write_record(record: &BenchRecord, spilled: &SpillRecord, dir: &Path) -> io::Result<()> {
    let path = dir.join("bench.json");
    let tmp = dir.join(format!(".bench.json.tmp-{}", std::process::id()));
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let mut out = BufWriter::new(file);
        let mut reader = Reader::open(dir, spilled).ok();
        // Each batch's place in the record, in the order the spill wrote them.
        let places: Vec<(usize, usize)> =
            record.levels.iter().flat_map(|l| (0..l.batches.len()).map(move |b| (l.concurrency, b))).collect();
        let place = |c: usize, b: usize| places.iter().position(|p| *p == (c, b));
        let mut pending: Option<Line> = None;
        let mut next_place = 0usize;
        let Value::Object(top) = serde_json::to_value(record).map_err(io::Error::other)? else {
            return Err(io::Error::other("a bench record is an object"));
        };
        object(&mut out, &top, "levels", &mut |out, levels| {
            array(out, levels, &mut |out, level| {
                let Value::Object(level) = level else { return value(out, level) };
                object(out, level, "batches", &mut |out, batches| {
                    array(out, batches, &mut |out, batch| {
                        let Value::Object(batch) = batch else { return value(out, batch) };
                        let here = next_place;
                        next_place += 1;
                        object(out, batch, "requests", &mut |out, _| {
                            out.write_all(b"[")?;
                            let mut first = true;
                            loop {
                                let line = match pending.take() {
                                    Some(line) => line,
                                    None => match reader.as_mut().and_then(Reader::next) {
                                        Some(line) => line,
                                        None => break,
                                    },
                                };
                                match place(line.concurrency, line.batch) {
                                    Some(p) if p == here => {
                                        out.write_all(if first { b"\n" } else { b",\n" })?;
                                        first = false;
                                        let text = serde_json::to_vec(&line.request).map_err(io::Error::other)?;
                                        out.write_all(&redact::bytes(&text))?;
                                    }
                                    // A later batch's: kept for it.
                                    Some(p) if p > here => {
                                        pending = Some(line);
                                        break;
                                    }
                                    _ => {}
                                }
                            }
                            out.write_all(b"]")
                        })
                    })
                })
            })
        })?;
        out.write_all(b"\n")?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

type Hole<'a, W> = dyn FnMut(&mut W, &Value) -> io::Result<()> + 'a;

/// A JSON value, its secrets redacted.
fn value<W: Write>(out: &mut W, v: &Value) -> io::Result<()> {
    let text = serde_json::to_vec(v).map_err(io::Error::other)?;
    out.write_all(&redact::bytes(&text))
}

/// An object whose member `hole` is written by `fill` (given the member's value), every other one as it is.
fn object<W: Write>(out: &mut W, map: &Map<String, Value>, hole: &str, fill: &mut Hole<'_, W>) -> io::Result<()> {
    out.write_all(b"{")?;
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"\n")?;
        value(out, &Value::String(k.clone()))?;
        out.write_all(b": ")?;
        if k == hole { fill(out, v)? } else { value(out, v)? }
    }
    out.write_all(b"\n}")
}

/// An array whose every element is written by `each`.
fn array<W: Write>(out: &mut W, v: &Value, each: &mut Hole<'_, W>) -> io::Result<()> {
    let Value::Array(items) = v else { return value(out, v) };
    out.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        out.write_all(if i > 0 { b",\n" } else { b"\n" })?;
        each(out, item)?;
    }
    out.write_all(b"]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gauntlet_schema::bench::{Batch, Level};

    fn request(i: usize) -> RequestRecord {
        RequestRecord {
            start: i as f64,
            events: vec![(0.1, format!("word{i}"), String::new()), (0.2, "more".into(), String::new())],
            completion_tokens: Some(2),
            error: None,
            connected: false,
            text_dropped: 0,
        }
    }

    /// A record of two levels (concurrency 1 and 2) of two batches each, their requests spilled into `dir`.
    fn spilled(dir: &Path, cap: u64) -> BenchRecord {
        let mut spill = Spill::with_cap(dir, cap).unwrap();
        let mut levels = Vec::new();
        for c in [1usize, 2] {
            let mut batches = Vec::new();
            for b in 0..2 {
                spill.batch(c, b, (0..c).map(|i| request(100 * c + 10 * b + i)).collect());
                let batch = Batch {
                    seconds: 1.0,
                    released_monotonic_ns: None,
                    in_flight_max: c,
                    receive_clock: None,
                    requests: Vec::new(),
                };
                batches.push(batch);
            }
            levels.push(Level {
                concurrency: c,
                batches,
                metrics: Value::Null,
                samples: Default::default(),
                comparisons: Vec::new(),
            });
        }
        let mut record: BenchRecord = serde_json::from_value(serde_json::json!({
            "bench_version": 6, "gauntlet_version": "0", "profile": "p", "started_at": "t", "identity": {},
            "identity_digest": "d", "runtime": {}, "definitions": {}, "verdict": "candidate", "rules": {},
            "workload": {"concurrency": [1, 2], "max_tokens": 8, "warmups": 0, "repetitions": 2}, "levels": [],
        }))
        .unwrap();
        record.levels = levels;
        record.spill = Some(spill.finish());
        record
    }

    /// The starts of each batch's requests in the `bench.json` written from the spill.
    fn written(dir: &Path, record: &BenchRecord) -> Vec<Vec<f64>> {
        write_record(record, record.spill.as_ref().unwrap(), dir).unwrap();
        let text = std::fs::read_to_string(dir.join("bench.json")).unwrap();
        let back = gauntlet_schema::parse_bench_record(&text, "bench.json").unwrap();
        back.levels.iter().flat_map(|l| &l.batches).map(|b| b.requests.iter().map(|r| r.start).collect()).collect()
    }

    #[test]
    fn bench_json_gets_every_spilled_request_back_in_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let record = spilled(dir.path(), SPILL_CAP);
        let s = record.spill.as_ref().unwrap();
        assert_eq!((s.records, s.dropped, s.error.as_deref()), (6, 0, None));
        assert_eq!(
            written(dir.path(), &record),
            vec![vec![100.0], vec![110.0], vec![200.0, 201.0], vec![210.0, 211.0]]
        );
        let mut starts = Vec::new();
        each_request(dir.path(), s, 2, &mut |r| starts.push(r.start));
        assert_eq!(starts, vec![200.0, 201.0, 210.0, 211.0]);
    }

    #[test]
    fn past_its_cap_the_spill_counts_records_as_dropped_and_writes_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let one =
            serde_json::to_vec(&LineOut { concurrency: 1, batch: 0, request: &request(100) }).unwrap().len() as u64;
        let record = spilled(dir.path(), 3 * one + 3);
        let s = record.spill.as_ref().unwrap();
        assert_eq!((s.records, s.dropped), (3, 3));
        assert!(std::fs::metadata(dir.path().join(SPILL_FILE)).unwrap().len() <= 3 * one + 3);
        assert_eq!(written(dir.path(), &record), vec![vec![100.0], vec![110.0], vec![200.0], vec![]]);
    }

    /// A spill file changed on disk is untrusted input: garbage, an overlong line, a line out of its place, a
    /// record of a batch that does not exist are skipped; a name outside the folder, a FIFO or a link is not read
    /// (and nothing waits on it).
    #[test]
    fn a_hostile_spill_file_is_read_within_its_caps_without_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let record = spilled(dir.path(), SPILL_CAP);
        let path = dir.path().join(SPILL_FILE);
        let good = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = good.lines().collect();
        let mut hostile = String::new();
        hostile.push_str("not json\n{\"concurrency\": 1}\n\n");
        hostile.push_str(&format!("{{\"junk\": \"{}\"}}\n", "x".repeat(LINE_CAP + 10)));
        hostile.push_str(&lines[1].replace("\"batch\":1", "\"batch\":99"));
        hostile.push('\n');
        hostile.push_str(lines[0]);
        hostile.push('\n');
        hostile.push_str(&lines[3].replace("\"concurrency\":2", "\"concurrency\":18446744073709551615"));
        hostile.push('\n');
        hostile.push_str(lines[2]);
        hostile.push('\n');
        // Two lines of one batch in the other order: both kept, in the file's order.
        hostile.push_str(lines[5]);
        hostile.push('\n');
        hostile.push_str(lines[4]);
        std::fs::write(&path, &hostile).unwrap();
        assert_eq!(written(dir.path(), &record), vec![vec![100.0], vec![], vec![200.0], vec![211.0, 210.0]]);
        let mut reader = Reader::open(dir.path(), record.spill.as_ref().unwrap()).unwrap();
        while reader.next().is_some() {}
        assert_eq!(reader.skipped, 4, "three lines not a record and one too long");

        for name in ["../bench.json", "/etc/passwd", "..", ""] {
            let mut s = record.spill.clone().unwrap();
            s.file = name.into();
            assert!(Reader::open(dir.path(), &s).is_err(), "{name}");
        }
        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(Reader::open(dir.path(), record.spill.as_ref().unwrap()).is_err(), "a FIFO is not read");
        assert_eq!(written(dir.path(), &record), vec![Vec::<f64>::new(); 4], "a bench.json without requests");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(Reader::open(dir.path(), record.spill.as_ref().unwrap()).is_err(), "a link is not followed");
        // A new spill replaces the link with a file, never writing through it.
        drop(Spill::create(dir.path()).unwrap());
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    }
}
