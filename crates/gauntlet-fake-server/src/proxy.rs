//! `--proxy-to http://HOST:PORT --event-delay-us N`: a delaying proxy in front of a real server, for the paired
//! bench's tests and its evidence benchmark. Every request is forwarded as it came (one per connection); a
//! streamed (chunked) answer is forwarded event by event, the k-th SSE event (k from 0) held until `(k + 1) * N`
//! microseconds after it arrived from the server. The delays add up, so each streamed token takes N µs longer
//! than the server took, as a server slower by N µs per token would; a constant delay would only shift the
//! stream. Other answers are forwarded whole.
//!
//! `--hold-first-ms H`: the 1st, 3rd, 5th, … streamed answer this proxy forwards (counted over all its
//! connections) has its events held until H ms after its first event arrived, then released together, as a hop
//! whose small writes wait on a delayed ACK holds the start of every other stream and then bursts it. In front of
//! two members of a paired bench asked one request at a time, that is the first request of every pair.
//!
//! With a delay, an event that carries llama.cpp's `timings` has them rewritten as the slower server it stands
//! for would report them: `predicted_ms` grows by N µs per predicted token, and `predicted_per_token_ms` and
//! `predicted_per_second` follow; so a bench that reads the server's own clock sees the injected slowdown too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Largest request body and largest non-streamed answer forwarded.
const BODY_CAP: usize = 16 << 20;

/// Streamed answers forwarded so far (for `--hold-first-ms`).
static STREAMS: AtomicU64 = AtomicU64::new(0);

pub fn serve(host: &str, port: u16, upstream: &str, delay: Duration, hold: Duration) -> ! {
    let target = upstream.strip_prefix("http://").unwrap_or(upstream).trim_end_matches('/').to_owned();
    let listener = TcpListener::bind((host, port)).unwrap_or_else(|e| super::die(&format!("bind: {e}")));
    eprintln!(
        "fake-server: proxy on {host}:{port} to {target}, {} µs per event, every other stream held {} ms",
        delay.as_micros(),
        hold.as_millis()
    );
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let target = target.clone();
        std::thread::spawn(move || {
            if let Err(e) = forward(stream, &target, delay, hold) {
                eprintln!("fake-server: proxy: {e}");
            }
        });
    }
    std::process::exit(0)
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<(String, Vec<(String, String)>)> {
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if headers.len() > 100 {
            return Err(std::io::Error::other("too many headers"));
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    Ok((first.trim_end().to_owned(), headers))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn forward(client: TcpStream, target: &str, delay: Duration, hold: Duration) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    let (request_line, headers) = read_head(&mut reader)?;
    let length: usize = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length.min(BODY_CAP)];
    reader.read_exact(&mut body)?;
    let mut up = TcpStream::connect(target)?;
    let mut head =
        format!("{request_line}\r\nHost: {target}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for name in ["content-type", "authorization", "accept"] {
        if let Some(v) = header(&headers, name) {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    head.push_str("\r\n");
    up.write_all(head.as_bytes())?;
    up.write_all(&body)?;
    let mut up = BufReader::new(up);
    let (status, headers) = read_head(&mut up)?;
    let content_type = header(&headers, "content-type").unwrap_or("application/json").to_owned();
    let chunked = header(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let streamed = chunked || content_type.starts_with("text/event-stream");
    if !streamed {
        let mut answer = Vec::new();
        match header(&headers, "content-length").and_then(|v| v.parse::<usize>().ok()) {
            Some(n) => {
                answer.resize(n.min(BODY_CAP), 0);
                up.read_exact(&mut answer)?;
            }
            None => {
                up.take(BODY_CAP as u64).read_to_end(&mut answer)?;
            }
        }
        let head = format!(
            "{status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            answer.len()
        );
        client.write_all(head.as_bytes())?;
        return client.write_all(&answer);
    }
    client.write_all(
        format!("{status}\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )?;
    let held = !hold.is_zero() && STREAMS.fetch_add(1, Ordering::SeqCst).is_multiple_of(2);
    // The server's events are read on their own thread and stamped as they arrive. Read in the loop that holds
    // them, an event that queued behind a held one would be stamped when that loop got round to it and held
    // again from there, so each token's delay would grow with its place in the stream (the k-th gap k·N longer,
    // not N) and the answer would reach the client long after the server finished, its client-side work moved
    // out of the server's decode.
    let (tx, rx) = std::sync::mpsc::channel::<std::io::Result<Piece>>();
    let reader = std::thread::spawn(move || {
        let mut pending: Vec<u8> = Vec::new();
        loop {
            // The answer's bytes as they come: chunk by chunk (chunked framing), or read by read (closed at the end).
            let piece = match if chunked { next_chunk(&mut up) } else { next_read(&mut up) } {
                Ok(Some(piece)) => piece,
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let arrived = Instant::now();
            pending.extend_from_slice(&piece);
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                if tx.send(Ok(Piece::Event(pending.drain(..end + 2).collect(), arrived))).is_err() {
                    return; // the client is gone
                }
            }
            if pending.len() > BODY_CAP {
                let _ = tx.send(Err(std::io::Error::other("event too large")));
                return;
            }
        }
        if !pending.is_empty() {
            let _ = tx.send(Ok(Piece::Tail(pending)));
        }
    });
    let mut held_until: Option<Instant> = None;
    let mut k: u32 = 0;
    // Forward every complete event ("…\n\n"), each held until its turn.
    for piece in rx {
        match piece? {
            Piece::Event(mut event, arrived) => {
                if !delay.is_zero() && event.windows(9).any(|w| w == b"\"timings\"") {
                    event = slower_timings(&event, delay);
                }
                k += 1;
                let release = *held_until.get_or_insert(if held { arrived + hold } else { arrived });
                let due = (arrived + delay * k).max(release);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                write_chunk(&mut client, &event)?;
            }
            Piece::Tail(rest) => write_chunk(&mut client, &rest)?,
        }
    }
    let _ = reader.join();
    client.write_all(b"0\r\n\r\n")
}

/// What the reading thread of a streamed answer passes on: a complete event with when it arrived, or what was
/// left after the last one when the server closed.
enum Piece {
    Event(Vec<u8>, Instant),
    Tail(Vec<u8>),
}

/// A `data: {…}` event whose `timings` (top level) are those of a server slower by `delay` per predicted token;
/// the event unchanged when it is not such JSON.
fn slower_timings(event: &[u8], delay: Duration) -> Vec<u8> {
    let text = String::from_utf8_lossy(event);
    let Some(json) = text.trim_end().strip_prefix("data: ") else { return event.to_vec() };
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(json) else { return event.to_vec() };
    let t = &mut v["timings"];
    let (Some(n), Some(ms)) = (t["predicted_n"].as_f64(), t["predicted_ms"].as_f64()) else { return event.to_vec() };
    let ms = ms + n * delay.as_secs_f64() * 1000.0;
    t["predicted_ms"] = ms.into();
    if n > 0.0 && ms > 0.0 {
        t["predicted_per_token_ms"] = (ms / n).into();
        t["predicted_per_second"] = (n * 1000.0 / ms).into();
    }
    format!("data: {v}\n\n").into_bytes()
}

/// The next chunk's data of a chunked body; `None` at its end.
fn next_chunk(up: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut size_line = String::new();
    if up.read_line(&mut size_line)? == 0 {
        return Ok(None);
    }
    let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|_| std::io::Error::other("bad chunk size"))?;
    if size == 0 {
        return Ok(None);
    }
    if size > BODY_CAP {
        return Err(std::io::Error::other("chunk too large"));
    }
    let mut chunk = vec![0u8; size + 2];
    up.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok(Some(chunk))
}

/// The next read of a body that ends when the server closes; `None` at its end.
fn next_read(up: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; 64 << 10];
    let n = up.read(&mut buf)?;
    buf.truncate(n);
    Ok((n > 0).then_some(buf))
}

fn write_chunk(client: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    client.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
    client.write_all(bytes)?;
    client.write_all(b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers one request with `n` SSE events, each its own chunk, written all at once: they all
    /// arrive together and queue in the proxy's socket.
    fn burst_server(n: usize) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (_, headers) = read_head(&mut reader).unwrap();
            let length: usize = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            reader.read_exact(&mut vec![0u8; length]).unwrap();
            let mut out = stream;
            let mut text = String::from(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            for i in 0..n {
                let event = format!("data: {{\"i\":{i}}}\n\n");
                text.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
            }
            text.push_str("0\r\n\r\n");
            out.write_all(text.as_bytes()).unwrap();
        });
        (addr, handle)
    }

    /// Events that reach the proxy together leave it N apart, the k-th k·N after they came: each is timed from
    /// when it arrived, not from when the loop holding the earlier ones read it. Read in that loop, the 20 events
    /// here (N = 10 ms) took 10 ms · (1 + 2 + … + 20) = 2.1 s to leave instead of 0.2 s.
    #[test]
    fn queued_events_are_delayed_from_their_arrival_not_from_the_last_release() {
        let (upstream, server) = burst_server(20);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_addr = listener.local_addr().unwrap();
        let delay = Duration::from_millis(10);
        let proxy = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            forward(stream, &upstream, delay, Duration::ZERO).unwrap();
        });
        let mut client = TcpStream::connect(proxy_addr).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let started = Instant::now();
        client.write_all(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        let took = started.elapsed();
        proxy.join().unwrap();
        server.join().unwrap();
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(text.matches("data: ").count(), 20, "{text}");
        assert!(took >= delay * 20, "{took:?}: the last event is held 20·N");
        // 0.2 s due; 1 s leaves room for a loaded runner and is half of what the late stamps took.
        assert!(took < Duration::from_secs(1), "{took:?}: delays grew with each event's place in the stream");
    }
}
