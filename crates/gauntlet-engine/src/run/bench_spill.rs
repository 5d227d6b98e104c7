//! The bench's spill file: every measured batch goes to `requests.jsonl` in the bench's folder as it ends (a line
//! with the batch's own record, then one per request; through a buffered writer, flushed per batch), so that a
//! long bench holds the numbers its statistics need ([`crate::bench::metrics::Pool`], the level's
//! [`BatchTally`](gauntlet_schema::bench::BatchTally) and bounded samples), not every batch and request. The file
//! has a cap ([`SPILL_CAP`]): past it requests are counted as dropped, not written; batch lines have
//! [`BATCH_ROOM`] more, so that the record still lists every batch of a bench whose requests filled the cap.
//! `bench.json` still carries the batches and their requests: they are streamed from this file into it, one at a
//! time, when it is written, and so are the HTML's latency distributions.
//!
//! The file is read back as untrusted input (it is a file on disk that anything could have changed): a regular
//! file only, a cap on the bytes read and on each line, lines that do not parse or are out of place skipped.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use gauntlet_schema::bench::{Batch, BenchRecord, RequestRecord, Spill as SpillRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::util::redact;

/// The spill file's name in the bench's folder.
pub const SPILL_FILE: &str = "requests.jsonl";

/// Bytes the spill file may hold (and that are read back from it). A request of 32 tokens takes about 1.3 KB, so
/// this is some 50 000 of them; `bench.json`, which carries them again, stays readable under
/// [`crate::util::bounded::RECORD_CAP`].
pub const SPILL_CAP: u64 = 64 << 20;

/// Bytes past [`SPILL_CAP`] for the batches' own lines (about 130 bytes each: some 30 000 batches more than the
/// requests' cap leaves room for).
pub const BATCH_ROOM: u64 = 4 << 20;

/// The longest line read back: a request's record is at most its capped text plus its events' times, and its
/// events are bounded by the response cap (8 MiB at most), about 30 bytes of record per event.
const LINE_CAP: usize = 16 << 20;

/// A line of the file: one request of a batch, or the batch's own record (its `requests` empty).
#[derive(Serialize)]
struct LineOut<'a> {
    concurrency: usize,
    batch: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<&'a RequestRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<&'a Batch>,
}

#[derive(Deserialize)]
struct Line {
    concurrency: usize,
    batch: usize,
    #[serde(default)]
    request: Option<RequestRecord>,
    #[serde(default)]
    header: Option<Batch>,
}

/// The writer of a bench's spill file.
pub(crate) struct Spill {
    out: Option<BufWriter<File>>,
    cap: u64,
    room: u64,
    bytes: u64,
    records: u64,
    dropped: u64,
    batches_dropped: u64,
    error: Option<String>,
}

impl Spill {
    /// A new, empty spill file in `dir` (created if need be), capped at [`SPILL_CAP`].
    pub(crate) fn create(dir: &Path) -> io::Result<Spill> {
        Spill::with_caps(dir, SPILL_CAP, BATCH_ROOM)
    }

    /// A spill whose requests stop at `cap` bytes and batch lines at `room` bytes past it.
    pub(crate) fn with_caps(dir: &Path, cap: u64, room: u64) -> io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(SPILL_FILE);
        // A fresh file, never one reached through a link left in its place.
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = crate::util::bounded::create_new(&path)?;
        Ok(Spill {
            out: Some(BufWriter::new(file)),
            cap,
            room,
            bytes: 0,
            records: 0,
            dropped: 0,
            batches_dropped: 0,
            error: None,
        })
    }

    /// Writes batch number `batch` of `concurrency` (its own line, then its requests') and flushes, so that an
    /// interrupted bench leaves every finished batch on disk. Takes the batch: the caller keeps none of it.
    pub(crate) fn batch(&mut self, concurrency: usize, batch: usize, mut b: Batch) {
        let requests = std::mem::take(&mut b.requests);
        if !self
            .write(&LineOut { concurrency, batch, request: None, header: Some(&b) }, self.cap.saturating_add(self.room))
        {
            self.batches_dropped += 1;
        }
        for request in &requests {
            if self.write(&LineOut { concurrency, batch, request: Some(request), header: None }, self.cap) {
                self.records += 1;
            } else {
                self.dropped += 1;
            }
        }
        drop(requests);
        if let Some(out) = &mut self.out
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
    }

    /// Writes one line if the file stays within `cap`; false when it was not written.
    fn write(&mut self, line: &LineOut, cap: u64) -> bool {
        let Some(out) = &mut self.out else { return false };
        let text = serde_json::to_vec(line).expect("serializable");
        let text = redact::bytes(&text);
        let len = text.len() as u64 + 1;
        if self.bytes.saturating_add(len) > cap {
            return false;
        }
        if let Err(e) = out.write_all(&text).and_then(|()| out.write_all(b"\n")) {
            self.fail(e);
            return false;
        }
        self.bytes += len;
        true
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
            batches_dropped: self.batches_dropped,
            error: self.error,
        }
    }
}

/// Reads a spill file back, line by line, within [`SPILL_CAP`] and [`BATCH_ROOM`] bytes and [`LINE_CAP`] per line.
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
        Ok(Reader { input: BufReader::new(file), left: SPILL_CAP + BATCH_ROOM, line: Vec::new(), skipped: 0 })
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
        if line.concurrency == concurrency
            && let Some(request) = &line.request
        {
            f(request);
        }
    }
}

/// Writes `bench.json` atomically, each level's batches and their requests streamed from the spill file in `dir`
/// (a level that lists its batches itself, as one folded without a spill does, gets only their requests from
/// it): one line in memory at a time. A line that does not belong where it stands is skipped; a missing one leaves
/// its batch out, or shorter (the record's `spill` counts what was dropped).
pub(crate) fn write_record(record: &BenchRecord, spilled: &SpillRecord, dir: &Path) -> io::Result<()> {
    let path = dir.join("bench.json");
    let tmp = dir.join(format!(".bench.json.tmp-{}", std::process::id()));
    // An interrupt waits for this write to end (renamed or removed): no temporary file is left behind.
    let _writing = crate::util::writing();
    let result = (|| {
        let file = crate::util::bounded::create(&tmp)?;
        let mut out = BufWriter::new(file);
        let mut lines = Lines { reader: Reader::open(dir, spilled).ok(), back: None };
        let order: Vec<usize> = record.levels.iter().map(|l| l.concurrency).collect();
        let place = |c: usize, b: usize| -> Place { order.iter().position(|&x| x == c).map(|level| (level, b)) };
        let Value::Object(top) = serde_json::to_value(record).map_err(io::Error::other)? else {
            return Err(io::Error::other("a bench record is an object"));
        };
        let mut level_at = 0usize;
        object(&mut out, &top, "levels", &mut |out, levels| {
            array(out, levels, &mut |out, level| {
                let here = level_at;
                level_at += 1;
                let Value::Object(level) = level else { return value(out, level) };
                object(out, level, "batches", &mut |out, listed| {
                    out.write_all(b"[")?;
                    let mut first = true;
                    match listed.as_array() {
                        Some(items) if !items.is_empty() => {
                            for (b, item) in items.iter().enumerate() {
                                out.write_all(if first { b"\n" } else { b",\n" })?;
                                first = false;
                                match item {
                                    Value::Object(header) => batch(out, header, &mut lines, Some((here, b)), &place)?,
                                    other => value(out, other)?,
                                }
                            }
                        }
                        _ => {
                            while let Some(line) = lines.next() {
                                match place(line.concurrency, line.batch) {
                                    Some((level, b)) if level == here => {
                                        // A request without its batch's line before it is out of place: skipped.
                                        let Some(header) = &line.header else { continue };
                                        let Value::Object(header) =
                                            serde_json::to_value(header).map_err(io::Error::other)?
                                        else {
                                            continue;
                                        };
                                        out.write_all(if first { b"\n" } else { b",\n" })?;
                                        first = false;
                                        batch(out, &header, &mut lines, Some((level, b)), &place)?;
                                    }
                                    // A later level's: kept for it.
                                    Some((level, _)) if level > here => {
                                        lines.back = Some(line);
                                        break;
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    out.write_all(b"]")
                })
            })
        })?;
        out.write_all(b"\n")?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        crate::util::bounded::sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Where a line belongs: its level's position in the record, then its batch (`None`: no level of the record).
type Place = Option<(usize, usize)>;

/// The spill file's lines in order, one of them put back.
struct Lines {
    reader: Option<Reader>,
    back: Option<Line>,
}

impl Lines {
    fn next(&mut self) -> Option<Line> {
        self.back.take().or_else(|| self.reader.as_mut()?.next())
    }
}

/// One batch's object: `header` with its `requests` the spill's request lines of place `here`, up to the first
/// line of a later place (put back for it).
fn batch<W: Write>(
    out: &mut W,
    header: &Map<String, Value>,
    lines: &mut Lines,
    here: Place,
    place: &dyn Fn(usize, usize) -> Place,
) -> io::Result<()> {
    object(out, header, "requests", &mut |out, _| {
        out.write_all(b"[")?;
        let mut first = true;
        while let Some(line) = lines.next() {
            let at = place(line.concurrency, line.batch);
            if at == here && at.is_some() {
                // A second line of this batch's own record is out of place: skipped.
                if let Some(request) = &line.request {
                    out.write_all(if first { b"\n" } else { b",\n" })?;
                    first = false;
                    let text = serde_json::to_vec(request).map_err(io::Error::other)?;
                    out.write_all(&redact::bytes(&text))?;
                }
            } else if at > here {
                lines.back = Some(line);
                break;
            }
        }
        out.write_all(b"]")
    })
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
            timings: None,
            ..Default::default()
        }
    }

    fn header(c: usize) -> Batch {
        Batch {
            seconds: 1.5,
            released_monotonic_ns: Some(7),
            in_flight_max: c,
            receive_clock: Some(gauntlet_schema::ReceiveClock::Kernel),
            requests: Vec::new(),
        }
    }

    /// A record of two levels (concurrency 1 and 2) of two batches each, spilled into `dir` as a bench does: the
    /// levels keep only their tally.
    fn spilled(dir: &Path, cap: u64, room: u64) -> BenchRecord {
        let mut spill = Spill::with_caps(dir, cap, room).unwrap();
        let mut levels = Vec::new();
        for c in [1usize, 2] {
            let mut tally = gauntlet_schema::bench::BatchTally::default();
            for b in 0..2 {
                let batch = Batch { requests: (0..c).map(|i| request(100 * c + 10 * b + i)).collect(), ..header(c) };
                tally.add(&batch, c);
                spill.batch(c, b, batch);
            }
            levels.push(Level {
                concurrency: c,
                batches: Vec::new(),
                tally: Some(tally),
                metrics: Value::Null,
                samples: Default::default(),
                batches_per_sample: 1,
                comparisons: Vec::new(),
                sub_sessions: None,
                server_clock: None,
                structured: None,
            });
        }
        let mut record: BenchRecord = serde_json::from_value(serde_json::json!({
            "bench_version": 8, "gauntlet_version": "0", "profile": "p", "started_at": "t", "identity": {},
            "identity_digest": "d", "runtime": {}, "definitions": {}, "verdict": "candidate", "rules": {},
            "workload": {"concurrency": [1, 2], "max_tokens": 8, "warmups": 0, "repetitions": 2}, "levels": [],
        }))
        .unwrap();
        record.levels = levels;
        record.spill = Some(spill.finish());
        record
    }

    /// The `bench.json` written from the spill, read back.
    fn written_record(dir: &Path, record: &BenchRecord) -> BenchRecord {
        write_record(record, record.spill.as_ref().unwrap(), dir).unwrap();
        let text = std::fs::read_to_string(dir.join("bench.json")).unwrap();
        gauntlet_schema::parse_bench_record(&text, "bench.json").unwrap()
    }

    /// The starts of each batch's requests in the `bench.json` written from the spill.
    fn written(dir: &Path, record: &BenchRecord) -> Vec<Vec<f64>> {
        let back = written_record(dir, record);
        back.levels.iter().flat_map(|l| &l.batches).map(|b| b.requests.iter().map(|r| r.start).collect()).collect()
    }

    fn line_len(c: usize, b: usize, request: Option<&RequestRecord>, header: Option<&Batch>) -> u64 {
        serde_json::to_vec(&LineOut { concurrency: c, batch: b, request, header }).unwrap().len() as u64 + 1
    }

    #[test]
    fn bench_json_gets_every_spilled_batch_and_request_back_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let record = spilled(dir.path(), SPILL_CAP, BATCH_ROOM);
        let s = record.spill.as_ref().unwrap();
        assert_eq!((s.records, s.dropped, s.batches_dropped, s.error.as_deref()), (6, 0, 0, None));
        assert_eq!(
            written(dir.path(), &record),
            vec![vec![100.0], vec![110.0], vec![200.0, 201.0], vec![210.0, 211.0]]
        );
        let back = written_record(dir.path(), &record);
        for l in &back.levels {
            assert!(
                l.batches
                    .iter()
                    .all(|b| (b.seconds, b.released_monotonic_ns, b.in_flight_max) == (1.5, Some(7), l.concurrency))
            );
            assert_eq!(l.tally, record.levels.iter().find(|x| x.concurrency == l.concurrency).unwrap().tally);
        }
        let mut starts = Vec::new();
        each_request(dir.path(), s, 2, &mut |r| starts.push(r.start));
        assert_eq!(starts, vec![200.0, 201.0, 210.0, 211.0]);
        // A level that lists its batches itself (folded without a spill) gets only its requests from the file.
        let mut listed = record.clone();
        for l in &mut listed.levels {
            l.batches = vec![header(l.concurrency), header(l.concurrency)];
        }
        assert_eq!(written(dir.path(), &listed), written(dir.path(), &record));
    }

    #[test]
    fn past_its_cap_the_spill_drops_requests_and_keeps_every_batch_line_within_its_room() {
        let dir = tempfile::tempdir().unwrap();
        let (h, r) = (line_len(1, 0, None, Some(&header(1))), line_len(1, 0, Some(&request(100)), None));
        // Room for the first three batch lines and three requests.
        let record = spilled(dir.path(), 3 * h + 3 * r, BATCH_ROOM);
        let s = record.spill.as_ref().unwrap();
        assert_eq!((s.records, s.dropped, s.batches_dropped), (3, 3, 0));
        assert!(std::fs::metadata(dir.path().join(SPILL_FILE)).unwrap().len() <= 4 * h + 3 * r);
        assert_eq!(written(dir.path(), &record), vec![vec![100.0], vec![110.0], vec![200.0], vec![]]);
        // Past the room too, batch lines are dropped and counted: the record lists the batches that were kept.
        let dir = tempfile::tempdir().unwrap();
        let record = spilled(dir.path(), 2 * h + 2 * r, h);
        let s = record.spill.as_ref().unwrap();
        assert_eq!((s.records, s.dropped, s.batches_dropped), (2, 4, 1));
        assert_eq!(written(dir.path(), &record), vec![vec![100.0], vec![110.0], vec![]]);
    }

    /// A spill file changed on disk is untrusted input: garbage, an overlong line, a line out of its place, a
    /// record of a batch that does not exist are skipped; a name outside the folder, a FIFO or a link is not read
    /// (and nothing waits on it).
    #[test]
    fn a_hostile_spill_file_is_read_within_its_caps_without_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let record = spilled(dir.path(), SPILL_CAP, BATCH_ROOM);
        let path = dir.path().join(SPILL_FILE);
        let good = std::fs::read_to_string(&path).unwrap();
        // 0 batch (1,0), 1 request 100, 2 batch (1,1), 3 request 110, 4 batch (2,0), 5 request 200, 6 request 201,
        // 7 batch (2,1), 8 request 210, 9 request 211.
        let lines: Vec<&str> = good.lines().collect();
        assert_eq!(lines.len(), 10);
        let mut hostile = String::new();
        hostile.push_str("not json\n{\"concurrency\": 1}\n\n");
        hostile.push_str(&format!("{{\"junk\": \"{}\"}}\n", "x".repeat(LINE_CAP + 10)));
        // A request of a batch that does not exist, then one before its batch's line.
        for line in [lines[1].replace("\"batch\":0", "\"batch\":99"), lines[1].to_owned(), lines[0].to_owned()] {
            hostile.push_str(&line);
            hostile.push('\n');
        }
        hostile.push_str(lines[1]);
        hostile.push('\n');
        // A batch of a level that does not exist: its request has no batch line and is skipped.
        hostile.push_str(&lines[2].replace("\"concurrency\":1", "\"concurrency\":18446744073709551615"));
        hostile.push('\n');
        hostile.push_str(lines[3]);
        hostile.push('\n');
        for i in [4, 5, 7] {
            hostile.push_str(lines[i]);
            hostile.push('\n');
        }
        // Two lines of one batch in the other order: both kept, in the file's order; its batch line again: skipped.
        for i in [9, 7, 8] {
            hostile.push_str(lines[i]);
            hostile.push('\n');
        }
        std::fs::write(&path, &hostile).unwrap();
        assert_eq!(written(dir.path(), &record), vec![vec![100.0], vec![200.0], vec![211.0, 210.0]]);
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
        let back = written_record(dir.path(), &record);
        assert!(back.levels.iter().all(|l| l.batches.is_empty()), "a bench.json without batches");
        assert_eq!(back.levels[1].tally.as_ref().unwrap().batches, 2, "the tally still counts them");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(Reader::open(dir.path(), record.spill.as_ref().unwrap()).is_err(), "a link is not followed");
        // A new spill replaces the link with a file, never writing through it.
        drop(Spill::create(dir.path()).unwrap());
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    }
}
