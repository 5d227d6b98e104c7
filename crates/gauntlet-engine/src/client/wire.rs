//! A lean HTTP/1.1 client for measuring streamed answers (`gauntlet bench` on an `http://` server).
//!
//! Each stream has its own connection, opened and warmed before a batch is released, and every read is stamped by
//! the kernel with the moment its bytes arrived (`SO_TIMESTAMPNS`, put on CLOCK_MONOTONIC), so that the client's
//! own scheduling and CPU load never enter a measured time: a token that arrived while the client was busy with
//! 255 other streams still carries its arrival time. Where the kernel gives no stamp, the time the read returned
//! is used and the answer says so. Every byte is untrusted: heads, chunk framing and sizes are bounded, every wait
//! has the request's deadline, and each fault is a [`ClientError`].

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gauntlet_schema::Answer;
use gauntlet_stamp::{enable_receive_stamps, recv_stamped};
use serde_json::Value;
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::error::ClientError;
use super::parse::{DoneScanner, StreamAssembler};

/// Longest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4 << 10;
/// How long the end of a body may follow its `data: [DONE]`.
const END_GRACE: Duration = Duration::from_millis(200);

/// Where chat requests go: resolved once, so that no measured request pays a name lookup.
#[derive(Debug, Clone)]
pub struct Endpoint {
    addrs: Vec<SocketAddr>,
    host: String,
    path: String,
    authorization: Option<String>,
    /// Extra `(name, value)` headers of the profile (`headers_env`).
    headers: Vec<(String, String)>,
    /// The server ends a stream at the body's end after its finish chunk, never with `[DONE]` (its kind's).
    close_ends: bool,
}

impl Endpoint {
    /// The chat endpoint under `base_url`; `None` when it is not plain `http://` (HTTPS and anything unusual go
    /// through [`super::Client`]) or its host does not resolve.
    pub async fn resolve(base_url: &str, api_key: Option<&str>, headers: &[(String, String)]) -> Option<Endpoint> {
        let (authority, prefix) = split_http_url(base_url)?;
        let with_port = if has_port(authority) { authority.to_owned() } else { format!("{authority}:80") };
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(with_port).await.ok()?.collect();
        (!addrs.is_empty()).then(|| Endpoint {
            addrs,
            host: authority.to_owned(),
            path: format!("{}/v1/chat/completions", prefix.trim_end_matches('/')),
            authorization: api_key.map(|k| format!("Bearer {k}")),
            headers: headers.to_vec(),
            close_ends: false,
        })
    }

    /// The same endpoint, for a server that ends its streams at the body's end after the finish chunk (never with
    /// `[DONE]`): [`super::Client::close_ends_stream`].
    pub fn ending_streams_at_close(mut self, close_ends: bool) -> Endpoint {
        self.close_ends = close_ends;
        self
    }

    fn url(&self) -> String {
        format!("http://{}{}", self.host, self.path)
    }

    fn request(&self, body: &[u8]) -> Vec<u8> {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: */*\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        if let Some(a) = &self.authorization {
            head.push_str("Authorization: ");
            head.push_str(a);
            head.push_str("\r\n");
        }
        // Names and values were checked when the client was built (no CR, LF or other control character).
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        bytes
    }

    async fn connect(&self, deadline: Instant) -> Result<Conn, ClientError> {
        let failed = |reason: String| ClientError::Connect { url: self.url(), reason };
        let attempt = TcpStream::connect(&self.addrs[..]);
        let stream = match tokio::time::timeout_at(deadline.into(), attempt).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Err(_) => return Err(failed("timed out".into())),
        };
        let _ = stream.set_nodelay(true);
        // Without stamps (not Linux, say) every read is timed when it returns, and the answer counts those reads.
        enable_receive_stamps(stream.as_raw_fd());
        Ok(Conn { stream, used: false })
    }
}

/// `http://authority/prefix` → (authority, prefix); `None` for any other scheme or for user info.
fn split_http_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.get(..7).filter(|s| s.eq_ignore_ascii_case("http://")).map(|_| &url[7..])?;
    let (authority, prefix) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    (!authority.is_empty() && !authority.contains('@') && !prefix.contains(['?', '#'])).then_some((authority, prefix))
}

fn has_port(authority: &str) -> bool {
    match authority.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => authority.contains(':'),
    }
}

/// One connection of the pool.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    /// Whether a request went out on it already.
    used: bool,
}

impl Conn {
    /// Whether the server has closed its side (or sent something unasked), judged without waiting.
    fn gone(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a non-blocking peek of at most one byte into a byte we own.
        let n = unsafe {
            libc::recv(self.stream.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
    }
}

/// CLOCK_MONOTONIC now (ns); it cannot fail on Linux.
fn now_ns() -> u64 {
    gauntlet_stamp::monotonic_ns().unwrap_or(0)
}

/// Bytes in from one connection, each read with its arrival time on CLOCK_MONOTONIC.
struct Reader<'a> {
    conn: &'a Conn,
    /// Bytes read and not yet taken.
    buf: Vec<u8>,
    /// Where each read lands first.
    scratch: Vec<u8>,
    /// When the bytes of the latest read arrived (monotonic ns).
    at: u64,
    unstamped_reads: usize,
    eof: bool,
}

impl<'a> Reader<'a> {
    fn new(conn: &'a Conn) -> Reader<'a> {
        Reader { conn, buf: Vec::new(), scratch: vec![0; 16 << 10], at: 0, unstamped_reads: 0, eof: false }
    }

    /// Reads once (waiting as long as it takes: the caller bounds it); false at the end of the stream.
    async fn fill(&mut self) -> Result<bool, ClientError> {
        let fd = self.conn.stream.as_raw_fd();
        let scratch = &mut self.scratch;
        let (n, at) = self
            .conn
            .stream
            .async_io(Interest::READABLE, || recv_stamped(fd, scratch, libc::MSG_DONTWAIT))
            .await
            .map_err(|e| ClientError::Transport(format!("read: {e}")))?;
        self.at = match at {
            Ok(arrived) => arrived,
            Err(returned) => {
                self.unstamped_reads += 1;
                returned
            }
        };
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        self.buf.extend_from_slice(&self.scratch[..n]);
        Ok(true)
    }

    /// The first line in the buffer (without its line end), taken out of it; `None` until one is complete.
    fn line(&mut self) -> Result<Option<Vec<u8>>, ClientError> {
        match self.buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok(Some(line))
            }
            None if self.buf.len() > MAX_LINE => {
                Err(ClientError::Malformed(format!("a chunk-size or trailer line longer than {MAX_LINE} bytes")))
            }
            None => Ok(None),
        }
    }
}

/// What a response head says.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    content_type: String,
    framing: Framing,
    close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    Chunked,
    Length(u64),
    UntilClose,
}

/// Most header lines a response head may have.
const MAX_HEADERS: usize = 64;

/// Parses a response head (status line and headers, without the blank line). `None` for a 1xx interim response.
/// The grammar is httparse's (status line, header names as tokens, values, line ends `\r\n` or `\n`, at most
/// [`MAX_HEADERS`] lines); what the head means for the body (framing, whether the connection closes) is read here.
fn parse_head(head: &[u8]) -> Result<Option<Head>, ClientError> {
    let first_line = || preview(&String::from_utf8_lossy(head.split(|b| *b == b'\n').next().unwrap_or(b"")));
    let mut full = head.strip_suffix(b"\r").unwrap_or(head).to_vec();
    full.extend_from_slice(b"\r\n\r\n");
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&full) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(ClientError::Malformed(format!("an incomplete response head: `{}`", first_line())));
        }
        Err(e) => return Err(ClientError::Malformed(format!("not an HTTP/1 response head ({e}): `{}`", first_line()))),
    }
    let (Some(version), Some(status)) = (response.version, response.code) else {
        return Err(ClientError::Malformed(format!("not an HTTP/1 status line: `{}`", first_line())));
    };
    if (100..200).contains(&status) {
        return Ok(None);
    }
    let mut h = Head { status, content_type: String::new(), framing: Framing::UntilClose, close: version == 0 };
    let (mut length, mut coded) = (None, false);
    for header in response.headers.iter() {
        let value = String::from_utf8_lossy(header.value);
        let value = value.trim();
        match header.name.to_ascii_lowercase().as_str() {
            "content-type" => h.content_type = value.to_ascii_lowercase(),
            "transfer-encoding" => {
                // Chunked only when it is the last coding; any transfer coding overrides a Content-Length.
                let chunked = value.rsplit(',').next().is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
                h.framing = if chunked { Framing::Chunked } else { Framing::UntilClose };
                coded = true;
            }
            "content-length" => {
                let n = value.parse::<u64>().map_err(|_| {
                    ClientError::Malformed(format!("Content-Length `{}` is not a number", preview(value)))
                })?;
                if length.is_some_and(|l| l != n) {
                    return Err(ClientError::Malformed("two different Content-Length headers".into()));
                }
                length = Some(n);
            }
            "connection" => {
                let tokens = value.split(',').map(|t| t.trim().to_ascii_lowercase());
                for t in tokens {
                    match t.as_str() {
                        "close" => h.close = true,
                        "keep-alive" => h.close = false,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if !coded && let Some(n) = length {
        h.framing = Framing::Length(n);
    }
    if status == 204 || status == 304 {
        h.framing = Framing::Length(0);
    }
    Ok(Some(h))
}

fn preview(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Where the head in `buf` ends: (the end of its last line, the start of the body). The first empty line ends it,
/// whatever the line ends: `\n\n`, `\n\r\n` (inside `\r\n\r\n`). Taking the first `\r\n\r\n` instead would read
/// the first event of a body framed with CRLF as headers when the head itself ends with a bare LF.
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = buf[from..].iter().position(|b| *b == b'\n').map(|i| from + i) {
        match &buf[i + 1..] {
            [b'\n', ..] => return Some((i, i + 2)),
            [b'\r', b'\n', ..] => return Some((i, i + 3)),
            _ => from = i + 1,
        }
    }
    None
}

/// Reads the response head; `Ok(None)` when the connection ended before its first byte.
async fn read_head(r: &mut Reader<'_>) -> Result<Option<Head>, ClientError> {
    loop {
        if let Some((i, n)) = head_end(&r.buf) {
            let head: Vec<u8> = r.buf.drain(..n).collect();
            match parse_head(&head[..i])? {
                Some(h) => return Ok(Some(h)),
                None => continue,
            }
        }
        if r.buf.len() > MAX_HEAD {
            return Err(ClientError::Malformed(format!("response head longer than {MAX_HEAD} bytes")));
        }
        let had = !r.buf.is_empty();
        if !r.fill().await? {
            return if had {
                Err(ClientError::Malformed("the connection ended inside the response head".into()))
            } else {
                Ok(None)
            };
        }
    }
}

/// The body decoder: framing in, body bytes out, each piece with the arrival time of the read that brought it.
struct Body {
    framing: Framing,
    /// Chunked: bytes left in the current chunk (None: a size line is next).
    left: Option<u64>,
    /// Chunked: after the last chunk, reading trailers.
    trailers: bool,
    done: bool,
}

impl Body {
    fn new(framing: Framing) -> Body {
        Body { framing, left: None, trailers: false, done: framing == Framing::Length(0) }
    }

    /// Body bytes decodable from what `r` holds now (possibly none); sets `done` at the body's end.
    fn decode(&mut self, r: &mut Reader<'_>) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        while !self.done {
            match self.framing {
                Framing::UntilClose => {
                    out.append(&mut r.buf);
                    self.done = r.eof;
                    break;
                }
                Framing::Length(ref mut left) => {
                    let n = (*left).min(r.buf.len() as u64) as usize;
                    out.extend(r.buf.drain(..n));
                    *left -= n as u64;
                    self.done = *left == 0;
                    if !self.done && r.eof {
                        return Err(ClientError::Malformed("the connection ended inside the body".into()));
                    }
                    break;
                }
                Framing::Chunked => match self.left {
                    Some(0) => {
                        // The CRLF after a chunk's data.
                        let Some(line) = r.line()? else { break };
                        if !line.is_empty() {
                            return Err(ClientError::Malformed("chunk data longer than its size".into()));
                        }
                        self.left = None;
                    }
                    Some(ref mut left) => {
                        if r.buf.is_empty() {
                            break;
                        }
                        let n = (*left).min(r.buf.len() as u64) as usize;
                        out.extend(r.buf.drain(..n));
                        *left -= n as u64;
                    }
                    None if self.trailers => {
                        let Some(line) = r.line()? else { break };
                        self.done = line.is_empty();
                    }
                    None => {
                        let Some(line) = r.line()? else { break };
                        let text = String::from_utf8_lossy(&line);
                        let size = text.split(';').next().unwrap_or("").trim();
                        let size = u64::from_str_radix(size, 16).ok().filter(|_| !size.is_empty() && size.len() <= 15);
                        match size {
                            Some(0) => self.trailers = true,
                            Some(n) => self.left = Some(n),
                            None => {
                                return Err(ClientError::Malformed(format!(
                                    "bad chunk size line `{}`",
                                    preview(&text)
                                )));
                            }
                        }
                    }
                },
            }
        }
        if !self.done && r.eof && self.framing == Framing::Chunked {
            return Err(ClientError::Malformed("the connection ended inside a chunked body".into()));
        }
        Ok(out)
    }
}

/// Makes `pool` hold `n` open connections, warming each new one with a one-token request that is not streamed,
/// so that the measured request after it is not the connection's first (a server may do work on a connection's
/// first request). A connection the server closes after answering is replaced by a fresh one that stays unwarmed.
/// Connections that carried an earlier batch's answers are kept when they are still open.
/// Connections that cannot be opened are left out: the measured requests connect themselves and say so.
pub async fn fill_pool(ep: &Endpoint, pool: &mut Vec<Conn>, n: usize, model: &str, deadline: Instant) {
    pool.retain(|c| !c.gone());
    pool.truncate(n);
    let missing = n - pool.len();
    let warm = serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": 1,
        "stream": false,
    });
    let body = serde_json::to_vec(&warm).unwrap_or_default();
    let opened = (0..missing).map(|_| async {
        let mut conn = ep.connect(deadline).await.ok()?;
        conn.used = true;
        let request = ep.request(&body);
        let answered = tokio::time::timeout_at(deadline.into(), async {
            write_all(&conn.stream, &request).await.ok()?;
            let mut r = Reader::new(&conn);
            let head = read_head(&mut r).await.ok()??;
            let mut b = Body::new(head.framing);
            let mut read = b.decode(&mut r).ok()?.len();
            while !b.done {
                if read > WARM_LIMIT {
                    return None;
                }
                r.fill().await.ok()?;
                read += b.decode(&mut r).ok()?.len();
            }
            (head.status == 200 && !head.close && !r.eof && r.buf.is_empty()).then_some(())
        })
        .await;
        match answered {
            Ok(Some(())) if !conn.gone() => Some(conn),
            _ => ep.connect(deadline).await.ok(),
        }
    });
    pool.extend(futures_util::future::join_all(opened).await.into_iter().flatten());
    // A server may close a connection a moment after its answer, keep-alive or not (llama.cpp's does after a
    // streamed one): let those closes land, and replace what they took with connections that are only opened.
    tokio::time::sleep(SETTLE).await;
    pool.retain(|c| !c.gone());
    let reopened = (pool.len()..n).map(|_| ep.connect(deadline));
    pool.extend(futures_util::future::join_all(reopened).await.into_iter().flatten());
}

/// How long a pool is left to settle before a batch is released.
const SETTLE: Duration = Duration::from_millis(20);

/// The most body a warm-up answer may have before its connection is given up.
const WARM_LIMIT: usize = 1 << 20;

/// A streamed chat request as measured.
#[derive(Debug)]
pub struct Stamped {
    /// CLOCK_MONOTONIC just before the request was written (ns).
    pub sent_ns: u64,
    /// The answer; its timeline's times are arrival times − `sent_ns`.
    pub answer: Result<Answer, ClientError>,
    /// Reads the kernel did not stamp (their time is when the read returned).
    pub unstamped_reads: usize,
    /// Whether this request had to open its connection (none was ready, or the ready one had been closed).
    pub connected: bool,
    /// The connection, when it can carry another request.
    pub conn: Option<Conn>,
}

/// Sends one streamed chat request on `conn` (or a new connection) and reads its answer by `deadline`.
pub async fn stream_chat(
    ep: &Endpoint,
    conn: Option<Conn>,
    body: &Value,
    deadline: Instant,
    max_bytes: usize,
) -> Stamped {
    let request = match serde_json::to_vec(body) {
        Ok(b) => ep.request(&b),
        Err(e) => {
            let answer = Err(ClientError::Transport(format!("cannot encode request: {e}")));
            return Stamped { sent_ns: now_ns(), answer, unstamped_reads: 0, connected: false, conn: None };
        }
    };
    let mut conn = conn.filter(|c| !c.gone());
    let mut connected = false;
    for attempt in 0..2 {
        let c = match conn.take() {
            Some(c) => c,
            None => {
                connected = true;
                match ep.connect(deadline).await {
                    Ok(c) => c,
                    Err(e) => {
                        let sent_ns = now_ns();
                        return Stamped { sent_ns, answer: Err(e), unstamped_reads: 0, connected, conn: None };
                    }
                }
            }
        };
        let reused = c.used;
        let headed = AtomicBool::new(false);
        let sent_ns = now_ns();
        let started = Instant::now();
        let url = ep.url();
        let work = exchange(&c, &url, &request, sent_ns, max_bytes, &headed, ep.close_ends);
        let outcome = tokio::time::timeout_at(deadline.into(), work).await.unwrap_or_else(|_| Outcome {
            answer: Err(ClientError::Timeout {
                seconds: started.elapsed().as_secs_f64(),
                during_body: headed.load(Ordering::Relaxed),
            }),
            unstamped_reads: 0,
            keep: false,
        });
        // A request lost to a connection the server closed before reading it goes out once more, on a new one.
        if attempt == 0 && reused && matches!(outcome.answer, Err(ClientError::ClosedBeforeRequest(_))) {
            continue;
        }
        let conn = outcome.keep.then_some(Conn { used: true, ..c });
        return Stamped { sent_ns, answer: outcome.answer, unstamped_reads: outcome.unstamped_reads, connected, conn };
    }
    unreachable!("the second attempt always returns")
}

/// Writes all of `bytes`, waiting for the socket as needed (the caller bounds the wait).
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What one exchange on a connection gave.
struct Outcome {
    answer: Result<Answer, ClientError>,
    unstamped_reads: usize,
    /// Whether the connection can carry another request.
    keep: bool,
}

/// Writes the request and reads the streamed answer; `headed` is set once the response head is in.
async fn exchange(
    c: &Conn,
    url: &str,
    request: &[u8],
    sent_ns: u64,
    max_bytes: usize,
    headed: &AtomicBool,
    close_ends: bool,
) -> Outcome {
    let fail = |answer: ClientError, unstamped_reads| Outcome { answer: Err(answer), unstamped_reads, keep: false };
    if let Err(e) = write_all(&c.stream, request).await {
        return fail(ClientError::ClosedBeforeRequest(format!("write: {e}")), 0);
    }
    let mut r = Reader::new(c);
    let since = |at: u64| at.saturating_sub(sent_ns) as f64 / 1e9;
    let head = match read_head(&mut r).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            let why = "the connection ended before any answer".to_owned();
            return fail(ClientError::ClosedBeforeRequest(why), r.unstamped_reads);
        }
        Err(e) => return fail(e, r.unstamped_reads),
    };
    headed.store(true, Ordering::Relaxed);
    let first_byte = since(r.at);
    let mut body = Body::new(head.framing);
    if head.status != 200 {
        // Keep a short, lossy preview of the error body: enough to read, bounded whatever the server sends.
        let mut preview = Vec::new();
        let rest = async {
            while let Ok(mut piece) = body.decode(&mut r) {
                preview.append(&mut piece);
                if body.done || preview.len() > 2048 || !matches!(r.fill().await, Ok(true)) {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(END_GRACE, rest).await;
        preview.truncate(500);
        let body = String::from_utf8_lossy(&preview).trim().to_owned();
        return fail(ClientError::Status { url: url.to_owned(), status: head.status, body }, r.unstamped_reads);
    }
    if !head.content_type.starts_with("text/event-stream") {
        let got = if head.content_type.is_empty() { "(none)".into() } else { head.content_type };
        return fail(ClientError::ContentType { got, expected: "text/event-stream" }, r.unstamped_reads);
    }
    // While the stream is open only keep each piece with its arrival time; parse once it has ended.
    let mut held: Vec<(f64, Vec<u8>)> = Vec::new();
    let mut received = 0usize;
    let mut done_at: Option<Instant> = None;
    let mut scanner = DoneScanner::default();
    let failure = loop {
        match body.decode(&mut r) {
            Ok(piece) if !piece.is_empty() => {
                received += piece.len();
                if received > max_bytes {
                    break Some(ClientError::TooLarge { limit: max_bytes });
                }
                if scanner.feed(&piece) && done_at.is_none() {
                    done_at = Some(Instant::now());
                }
                held.push((since(r.at), piece));
            }
            Ok(_) => {}
            Err(e) => break Some(e),
        }
        if body.done {
            break None;
        }
        // After `[DONE]` the body's end is awaited briefly: the answer is complete without it. At the end of the
        // connection, the next decode says what it cut short.
        let read = match done_at {
            Some(t) => match tokio::time::timeout_at((t + END_GRACE).into(), r.fill()).await {
                Ok(read) => read,
                Err(_) => break None,
            },
            None => r.fill().await,
        };
        if let Err(e) = read {
            break Some(e);
        }
    };
    let keep = failure.is_none() && body.done && !head.close && !r.eof && r.buf.is_empty();
    let unstamped_reads = r.unstamped_reads;
    if let Some(e) = failure
        && done_at.is_none()
    {
        return fail(e, unstamped_reads);
    }
    let mut assembler = StreamAssembler::ending(close_ends);
    for (t, piece) in &held {
        if let Err(e) = assembler.feed(piece, *t) {
            return fail(e, unstamped_reads);
        }
        if assembler.done() {
            break;
        }
    }
    match assembler.finish() {
        Ok(mut answer) => {
            answer.first_byte_seconds = Some(first_byte);
            Outcome { answer: Ok(answer), unstamped_reads, keep }
        }
        Err(e) => fail(e, unstamped_reads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_are_taken_and_their_prefix_is_kept() {
        assert_eq!(split_http_url("http://127.0.0.1:8080"), Some(("127.0.0.1:8080", "")));
        assert_eq!(split_http_url("HTTP://host/serving/"), Some(("host", "/serving/")));
        assert_eq!(split_http_url("http://[::1]:9/x"), Some(("[::1]:9", "/x")));
        assert_eq!(split_http_url("https://host"), None);
        assert_eq!(split_http_url("http://user:pw@host"), None);
        assert_eq!(split_http_url("http://"), None);
        assert_eq!(split_http_url("http://h/p?q=1"), None);
        assert!(has_port("[::1]:9") && !has_port("[::1]") && has_port("h:1") && !has_port("h"));
    }

    #[test]
    fn a_head_ends_at_its_first_empty_line_whatever_the_line_ends() {
        // A bare-LF head followed by CRLF-framed events: the head ends at `\n\n`, not at the first event's
        // `\r\n\r\n` (which would read that event as headers and drop it, #32 D10).
        let wire = b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\n\ndata: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n";
        let (i, body) = head_end(wire).unwrap();
        assert_eq!(&wire[..i], b"HTTP/1.1 200 OK\nContent-Type: text/event-stream");
        assert!(wire[body..].starts_with(b"data: {"));
        let crlf = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nrest";
        let (i, body) = head_end(crlf).unwrap();
        assert_eq!((&crlf[..i], &crlf[body..]), (&b"HTTP/1.1 200 OK\r\nContent-Length: 0\r"[..], &b"rest"[..]));
        // LF-ended header lines, then a CRLF blank line.
        let mixed = b"HTTP/1.1 200 OK\nA: b\n\r\nbody";
        assert_eq!(&mixed[head_end(mixed).unwrap().1..], b"body");
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n\r"), None);
        assert!(parse_head(&crlf[..i]).unwrap().is_some());
    }

    #[test]
    fn heads_give_status_type_framing_and_whether_the_connection_closes() {
        let h =
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream\r\nTransfer-Encoding: chunked").unwrap();
        assert_eq!(
            h,
            Some(Head {
                status: 200,
                content_type: "text/event-stream".into(),
                framing: Framing::Chunked,
                close: false
            })
        );
        let h = parse_head(b"HTTP/1.1 500 Oops\r\nContent-Length: 12\r\nConnection: close").unwrap().unwrap();
        assert_eq!((h.status, h.framing, h.close), (500, Framing::Length(12), true));
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream").unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5").unwrap().unwrap();
        assert_eq!(h.framing, Framing::UntilClose, "a transfer coding overrides Content-Length");
        assert_eq!(parse_head(b"HTTP/1.1 100 Continue").unwrap(), None);
        for bad in [
            &b"SSH-2.0-OpenSSH"[..],
            b"HTTP/1.1 abc OK",
            b"HTTP/1.1 200 OK\r\nno colon here",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1",
        ] {
            assert!(matches!(parse_head(bad), Err(ClientError::Malformed(_))), "{}", String::from_utf8_lossy(bad));
        }
        let two = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2");
        assert!(matches!(two, Err(ClientError::Malformed(_))));
        // The header grammar, not a split at the first colon: a name is a token, and a head has a bounded number of
        // lines (a hand-split parser took both).
        let spaced = parse_head(b"HTTP/1.1 200 OK\r\nContent Length: 5");
        assert!(matches!(spaced, Err(ClientError::Malformed(_))), "{spaced:?}");
        let many: Vec<u8> = (0..=MAX_HEADERS).fold(b"HTTP/1.1 200 OK".to_vec(), |mut h, i| {
            h.extend_from_slice(format!("\r\nX-{i}: y").as_bytes());
            h
        });
        assert!(matches!(parse_head(&many), Err(ClientError::Malformed(_))), "{} header lines", MAX_HEADERS + 1);
        let at_most = parse_head(&many[..many.iter().rposition(|b| *b == b'\r').unwrap()]).unwrap().unwrap();
        assert_eq!(at_most.status, 200, "{MAX_HEADERS} header lines are fine");
        // Bare line feeds, as some small servers send them; and a status line without a reason.
        let h = parse_head(b"HTTP/1.1 200 OK\nContent-Length: 3").unwrap().unwrap();
        assert_eq!(h.framing, Framing::Length(3));
        assert_eq!(parse_head(b"HTTP/1.1 204").unwrap().map(|h| h.framing), Some(Framing::Length(0)));
    }

    /// Decodes `wire` fed in pieces of `step` bytes (no socket: the reader's buffer is filled by hand).
    fn decode_in_pieces(framing: Framing, wire: &[u8], step: usize) -> Result<(Vec<u8>, bool), ClientError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _guard = rt.enter();
        let std_tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(std_tcp.local_addr().unwrap()).unwrap();
        client.set_nonblocking(true).unwrap();
        let conn = Conn { stream: TcpStream::from_std(client).unwrap(), used: false };
        let mut r = Reader::new(&conn);
        let mut body = Body::new(framing);
        let mut out = Vec::new();
        for piece in wire.chunks(step) {
            r.buf.extend_from_slice(piece);
            out.extend(body.decode(&mut r)?);
        }
        r.eof = true;
        out.extend(body.decode(&mut r)?);
        Ok((out, body.done))
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_pieces_they_arrive_in() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n";
        for step in [1, 2, 3, 7, wire.len()] {
            assert_eq!(decode_in_pieces(Framing::Chunked, wire, step).unwrap(), (b"hello, world".to_vec(), true));
        }
        let (body, done) = decode_in_pieces(Framing::Length(4), b"abcdef", 1).unwrap();
        assert_eq!((body, done), (b"abcd".to_vec(), true));
        assert_eq!(decode_in_pieces(Framing::UntilClose, b"xyz", 2).unwrap(), (b"xyz".to_vec(), true));
    }

    #[test]
    fn broken_framing_is_a_finding() {
        for (framing, wire) in [
            (Framing::Chunked, &b"zz\r\nhello\r\n"[..]),
            (Framing::Chunked, b"2\r\nhello\r\n"),
            (Framing::Chunked, b"5\r\nhel"),
            (Framing::Chunked, b"fffffffffffffffffff\r\n"),
            (Framing::Length(10), b"short"),
        ] {
            let got = decode_in_pieces(framing, wire, 3);
            assert!(
                matches!(got, Err(ClientError::Malformed(_))),
                "{framing:?} {:?}: {got:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let long_line = vec![b'1'; MAX_LINE + 10];
        assert!(matches!(decode_in_pieces(Framing::Chunked, &long_line, 4096), Err(ClientError::Malformed(_))));
    }
}
