//! OpenAI-compatible chat completions over HTTP, streamed or not. Every byte from the server is untrusted: each way
//! an answer can be wrong becomes a typed [`ClientError`], never a panic, and no read outlives its deadline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use gauntlet_schema::Answer;
use serde_json::Value;

use super::error::ClientError;
use super::parse::{DoneScanner, StreamAssembler, parse_completion};
use super::tokens::asked_for_tokens;

/// Asked by [`Client::chat_patiently`] when a request's deadline has passed without its whole answer.
pub trait Patience {
    /// A later deadline to wait until, or None to give up now.
    fn extend(&mut self) -> Option<Instant>;
}

/// Patience that never extends: the deadline is the deadline.
pub struct Impatient;

impl Patience for Impatient {
    fn extend(&mut self) -> Option<Instant> {
        None
    }
}

/// Largest response body accepted; a server that sends more is broken (or hostile) and is reported as such.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 << 20;

/// What one GET of a self-description endpoint returned (see [`Client::get_described`]).
#[derive(Debug, Clone)]
pub struct Described {
    pub status: u16,
    pub server: Option<String>,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    extra_headers: Vec<(String, String)>,
    max_response_bytes: usize,
    /// Timestamp and keep each streamed chunk, parse after the stream ends (see [`Client::timing_first`]).
    defer_parsing: bool,
    /// The server ends a stream at the body's end after its finish chunk, never with `[DONE]` (see
    /// [`Client::ending_streams_at_close`]).
    close_ends_stream: bool,
}

/// How an attached server is reached beyond its URL.
#[derive(Debug, Clone, Default)]
pub struct Transport {
    /// PEM certificate authorities trusted besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// `(name, value)` headers sent with every request; the values are secrets.
    pub headers: Vec<(String, String)>,
}

/// Why a client with a [`Transport`] could not be built. Never carries a header's value (a secret).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("the CA file holds no usable PEM certificate ({0})")]
    BadPem(#[source] reqwest::Error),
    #[error("the CA file holds no PEM certificate")]
    NoCertificate,
    #[error("`{}` is not a header name", name.escape_debug())]
    HeaderName { name: String },
    /// `name` as sent (lower case).
    #[error("the value of header `{name}` has characters a header cannot carry")]
    HeaderValue { name: String },
    #[error("cannot build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
}

impl Client {
    /// `base_url` is the server's root, possibly with a path prefix (`http://host:8000/serving`);
    /// endpoints are appended to it, never substituted for its path.
    pub fn new(base_url: &str, api_key: Option<String>) -> Client {
        Client::with_transport(base_url, api_key, &Transport::default()).expect("a client without extras always builds")
    }

    /// A client that also trusts `transport`'s certificate authorities (for an `https://` server; the system's are
    /// always trusted) and sends its extra headers with every request. An unreadable PEM or a header value that
    /// cannot be sent is an error naming it (never the value).
    pub fn with_transport(
        base_url: &str,
        api_key: Option<String>,
        transport: &Transport,
    ) -> Result<Client, TransportError> {
        let mut builder = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            // Only the configured base URL is ever called: a redirect is the server's answer, never followed.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &transport.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(TransportError::BadPem)?;
            if certs.is_empty() {
                return Err(TransportError::NoCertificate);
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &transport.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| TransportError::HeaderName { name: name.clone() })?;
            let mut value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| TransportError::HeaderValue { name: name.as_str().to_owned() })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let http = builder.default_headers(headers).build().map_err(TransportError::Build)?;
        Ok(Client {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            extra_headers: transport.headers.clone(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            defer_parsing: false,
            close_ends_stream: false,
        })
    }

    /// The extra headers every request carries (names and secret values), for the lean measuring client.
    pub fn extra_headers(&self) -> &[(String, String)] {
        &self.extra_headers
    }

    /// For measuring: while a stream is open, only timestamp and keep its chunks, and parse them once it has ended,
    /// so that one stream's parsing never delays another's timestamps. A stream that turns malformed is then
    /// reported when it ends (or times out) instead of at the bad event.
    pub fn timing_first(mut self) -> Client {
        self.defer_parsing = true;
        self
    }

    /// For a server whose streams end at the body's end after the chunk with the `finish_reason`, never with
    /// `data: [DONE]` (its kind's departure, `kinds::StreamEnd::FinishThenClose`): such an end is the answer's end,
    /// and a body that ends before any `finish_reason` is still cut short. Off (the default), a stream without
    /// `[DONE]` is an error.
    pub fn ending_streams_at_close(mut self, close_ends: bool) -> Client {
        self.close_ends_stream = close_ends;
        self
    }

    pub fn close_ends_stream(&self) -> bool {
        self.close_ends_stream
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    pub fn with_max_response_bytes(mut self, limit: usize) -> Client {
        self.max_response_bytes = limit;
        self
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url, path.trim_start_matches('/'))
    }

    /// GET `path` under the base URL with the key, within `timeout`: the URL (for messages) and the answer.
    async fn get(&self, path: &str, timeout: Duration) -> Result<(String, reqwest::Response), ClientError> {
        let url = self.url(path);
        let mut req = self.http.get(&url).timeout(timeout);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| transport(&url, e, timeout.as_secs_f64(), false))?;
        Ok((url, resp))
    }

    /// POST a small JSON document (a tokenizer endpoint) and read its JSON answer: a 200 answer of at most 1 MiB,
    /// all of it within `timeout`.
    pub async fn post_json(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value, ClientError> {
        let url = self.url(path);
        let bytes =
            serde_json::to_vec(body).map_err(|e| ClientError::Transport(format!("cannot encode request: {e}")))?;
        let mut req =
            self.http.post(&url).timeout(timeout).header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| transport(&url, e, timeout.as_secs_f64(), false))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ClientError::Status { url, status, body: String::new() });
        }
        let buf = read_capped(resp, &url, timeout, 1 << 20).await?;
        serde_json::from_slice(&buf).map_err(|e| ClientError::Malformed(format!("body is not JSON ({e})")))
    }

    /// GET a health endpoint; Ok(status) for any HTTP answer.
    pub async fn health(&self, path: &str, timeout: Duration) -> Result<u16, ClientError> {
        let (_, resp) = self.get(path, timeout).await?;
        let status = resp.status().as_u16();
        // Read the (small) body: a connection goes back to the pool only once its response is consumed.
        let mut chunks = resp.bytes_stream();
        let mut read = 0usize;
        while let Some(Ok(chunk)) = chunks.next().await {
            read += chunk.len();
            if read > 64 << 10 {
                break;
            }
        }
        Ok(status)
    }

    /// Opens `n` connections to the server so that requests released next find them open: a connect inside a
    /// measured request would be counted as time to first token. It sends `n` one-token requests at once, not
    /// streamed: each holds its connection while the server answers, so the pool ends with `n` of them, and
    /// servers that close a connection after a streamed answer (llama.cpp's does) keep these open. Failures are
    /// ignored here; the measured requests report their own.
    pub async fn warm_connections(&self, model: &str, n: usize, timeout: Duration) {
        let body = serde_json::json!({
            "model": model,
            "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 1,
            "stream": false,
        });
        let deadline = Instant::now() + timeout;
        let probes: Vec<_> = (0..n)
            .map(|_| {
                let (client, body) = (self.clone(), body.clone());
                tokio::spawn(async move { client.chat(&body, deadline).await })
            })
            .collect();
        futures_util::future::join_all(probes).await;
    }

    /// GET a small JSON document (server properties). Bounded in time and size.
    pub async fn get_json(&self, path: &str, timeout: Duration) -> Result<Value, ClientError> {
        let (url, resp) = self.get(path, timeout).await?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ClientError::Status { url, status, body: String::new() });
        }
        let buf = read_capped(resp, &url, timeout, 1 << 20).await?;
        serde_json::from_slice(&buf).map_err(|e| ClientError::Malformed(format!("body is not JSON ({e})")))
    }

    /// GET an endpoint a server describes itself on: its status, its `Server` header and its body (JSON, or the
    /// text of a plain answer), all bounded (64 KiB, the header 200 characters) and untrusted.
    pub async fn get_described(&self, path: &str, timeout: Duration) -> Result<Described, ClientError> {
        let (url, resp) = self.get(path, timeout).await?;
        let status = resp.status().as_u16();
        let server = resp
            .headers()
            .get(reqwest::header::SERVER)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).chars().take(200).collect());
        let buf = read_capped(resp, &url, timeout, 64 << 10).await?;
        let body = serde_json::from_slice(&buf)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&buf).chars().take(200).collect()));
        Ok(Described { status, server, body })
    }

    /// GET a text document (Prometheus `/metrics`): the body of a 200 answer, at most `cap` bytes, all of it
    /// within `timeout` (reqwest's timeout covers the body). Anything else is an error naming the URL.
    pub async fn get_text(&self, path: &str, timeout: Duration, cap: usize) -> Result<String, ClientError> {
        let (url, resp) = self.get(path, timeout).await?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ClientError::Status { url, status, body: String::new() });
        }
        let buf = read_capped(resp, &url, timeout, cap).await?;
        String::from_utf8(buf).map_err(|_| ClientError::Malformed("body is not UTF-8 text".into()))
    }

    /// POST `/v1/chat/completions`. The answer must be complete before `deadline`. A request lost to a connection
    /// the server had closed before it went out is sent once more (the server never saw the first).
    /// A request that asked for logprobs and got none has its answer's tokens recorded as `text-only`.
    pub async fn chat(&self, body: &Value, deadline: Instant) -> Result<Answer, ClientError> {
        self.chat_patiently(body, deadline, &mut Impatient).await
    }

    /// [`Client::chat`], where `patience` is asked each time the deadline passes without the whole answer: a later
    /// deadline it gives is waited for too (a server still computing the answer is busy, not hung); None ends the
    /// wait with [`ClientError::Timeout`] after all the time waited.
    pub async fn chat_patiently(
        &self,
        body: &Value,
        deadline: Instant,
        patience: &mut (dyn Patience + Send),
    ) -> Result<Answer, ClientError> {
        let mut answer = match self.chat_once(body, deadline, patience).await {
            Err(ClientError::ClosedBeforeRequest(_)) => self.chat_once(body, deadline, patience).await,
            other => other,
        }?;
        if answer.tokens.is_none() && asked_for_tokens(body) {
            answer.tokens = Some(gauntlet_schema::AnswerTokens::text_only());
        }
        Ok(answer)
    }

    async fn chat_once(
        &self,
        body: &Value,
        deadline: Instant,
        patience: &mut (dyn Patience + Send),
    ) -> Result<Answer, ClientError> {
        let started = Instant::now();
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let url = self.url("v1/chat/completions");
        let got_bytes = AtomicBool::new(false);
        let work = self.chat_inner(&url, body, stream, started, &got_bytes);
        tokio::pin!(work);
        let mut until = deadline;
        loop {
            match tokio::time::timeout_at(until.into(), &mut work).await {
                Ok(result) => return result,
                Err(_) => match patience.extend() {
                    Some(later) if later > until => until = later,
                    _ => {
                        return Err(ClientError::Timeout {
                            seconds: started.elapsed().as_secs_f64(),
                            during_body: got_bytes.load(Ordering::Relaxed),
                        });
                    }
                },
            }
        }
    }

    async fn chat_inner(
        &self,
        url: &str,
        body: &Value,
        stream: bool,
        started: Instant,
        got_bytes: &AtomicBool,
    ) -> Result<Answer, ClientError> {
        let bytes =
            serde_json::to_vec(body).map_err(|e| ClientError::Transport(format!("cannot encode request: {e}")))?;
        let mut req = self.http.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| match transport(url, e, 0.0, false) {
            ClientError::Transport(m) if m.contains("connection closed before message completed") => {
                ClientError::ClosedBeforeRequest(m)
            }
            other => other,
        })?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let location = resp.headers().get(reqwest::header::LOCATION).map(|v| String::from_utf8_lossy(v.as_bytes()));
        let redirect =
            location.map(|l| format!("redirect to `{}` not followed", l.chars().take(200).collect::<String>()));
        got_bytes.store(true, Ordering::Relaxed);
        let mut chunks = resp.bytes_stream();
        if let (Some(body), true) = (redirect, (300..400).contains(&status)) {
            return Err(ClientError::Status { url: url.to_owned(), status, body });
        }
        if status != 200 {
            // Keep a short, lossy preview of the error body: enough to read, bounded whatever the server sends.
            let mut preview = Vec::new();
            while let Some(Ok(chunk)) = chunks.next().await {
                preview.extend_from_slice(&chunk);
                if preview.len() > 2048 {
                    break;
                }
            }
            preview.truncate(500);
            return Err(ClientError::Status {
                url: url.to_owned(),
                status,
                body: String::from_utf8_lossy(&preview).trim().to_owned(),
            });
        }
        let expected = if stream { "text/event-stream" } else { "application/json" };
        if !content_type.starts_with(expected) {
            return Err(ClientError::ContentType {
                got: if content_type.is_empty() { "(none)".into() } else { content_type },
                expected,
            });
        }
        let mut first_byte = None;
        let mut received = 0usize;
        if stream {
            let mut assembler = StreamAssembler::ending(self.close_ends_stream);
            let mut ended = false;
            if self.defer_parsing {
                let mut held = Vec::new();
                let mut scanner = DoneScanner::default();
                ended = true;
                while let Some(chunk) = chunks.next().await {
                    let (t, chunk) = self.intake(chunk, url, started, &mut first_byte, &mut received)?;
                    let done = scanner.feed(&chunk);
                    held.push((t, chunk));
                    if done {
                        ended = false;
                        break;
                    }
                }
                for (t, chunk) in &held {
                    assembler.feed(chunk, *t)?;
                    if assembler.done() {
                        break;
                    }
                }
            }
            // Parsing as it comes: the whole stream, or what follows a `[DONE]` that was only text in a token.
            while !ended && !assembler.done() {
                let Some(chunk) = chunks.next().await else {
                    ended = true;
                    break;
                };
                let (t, chunk) = self.intake(chunk, url, started, &mut first_byte, &mut received)?;
                assembler.feed(&chunk, t)?;
            }
            if !ended {
                // Read the body's end after `[DONE]` (briefly): a connection whose response was not read to the
                // end is closed, not pooled, and the next request would pay a connect inside its TTFT.
                let rest = async {
                    let mut extra = 0usize;
                    while let Some(Ok(chunk)) = chunks.next().await {
                        extra += chunk.len();
                        if extra > 64 << 10 {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_millis(200), rest).await;
            }
            let mut answer = assembler.finish()?;
            answer.first_byte_seconds = first_byte;
            Ok(answer)
        } else {
            let mut buf = Vec::new();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| transport(url, e, 0.0, true))?;
                first_byte.get_or_insert(started.elapsed().as_secs_f64());
                if buf.len() + chunk.len() > self.max_response_bytes {
                    return Err(ClientError::TooLarge { limit: self.max_response_bytes });
                }
                buf.extend_from_slice(&chunk);
            }
            let value: Value =
                serde_json::from_slice(&buf).map_err(|e| ClientError::Malformed(format!("body is not JSON ({e})")))?;
            let mut answer = parse_completion(&value)?;
            answer.first_byte_seconds = first_byte;
            Ok(answer)
        }
    }
}

impl Client {
    /// A streamed chunk as it arrives: its time since `started`, counted against the response size limit.
    fn intake<B: AsRef<[u8]>>(
        &self,
        chunk: Result<B, reqwest::Error>,
        url: &str,
        started: Instant,
        first_byte: &mut Option<f64>,
        received: &mut usize,
    ) -> Result<(f64, B), ClientError> {
        let chunk = chunk.map_err(|e| transport(url, e, 0.0, true))?;
        let t = started.elapsed().as_secs_f64();
        first_byte.get_or_insert(t);
        *received += chunk.as_ref().len();
        if *received > self.max_response_bytes {
            return Err(ClientError::TooLarge { limit: self.max_response_bytes });
        }
        Ok((t, chunk))
    }
}

/// A GET's body, refused as soon as it passes `cap` bytes (the rest is never read).
async fn read_capped(
    resp: reqwest::Response,
    url: &str,
    timeout: Duration,
    cap: usize,
) -> Result<Vec<u8>, ClientError> {
    let mut chunks = resp.bytes_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| transport(url, e, timeout.as_secs_f64(), true))?;
        if buf.len() + chunk.len() > cap {
            return Err(ClientError::TooLarge { limit: cap });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

fn transport(url: &str, e: reqwest::Error, seconds: f64, during_body: bool) -> ClientError {
    if e.is_timeout() {
        ClientError::Timeout { seconds, during_body }
    } else if e.is_connect() {
        // The whole chain: a refused certificate is three sources deep ("client error (Connect)" → … → "invalid
        // peer certificate: UnknownIssuer").
        let reason = chain(std::error::Error::source(&e)).unwrap_or_else(|| e.to_string());
        ClientError::Connect { url: url.to_owned(), reason }
    } else {
        let mut msg = e.to_string();
        if let Some(more) = chain(std::error::Error::source(&e)) {
            msg.push_str(": ");
            msg.push_str(&more);
        }
        ClientError::Transport(msg)
    }
}

/// An error and its sources, joined by ": ", each said once (hyper repeats its source in its own text).
fn chain(mut src: Option<&(dyn std::error::Error + 'static)>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    (!parts.is_empty()).then(|| parts.join(": "))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Instant;

    use super::*;

    /// A server that answers with a redirect to another address of ours: the client reports it and never calls
    /// the other address (only the configured base URL is ever called).
    #[test]
    fn redirects_are_reported_not_followed() {
        let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
        elsewhere.set_nonblocking(true).unwrap();
        let target = format!("http://{}/v1/chat/completions", elsewhere.local_addr().unwrap());
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        server.set_nonblocking(true).unwrap();
        let answer = std::thread::spawn(move || {
            // Bounded: a client that never connects fails the test instead of hanging it.
            let until = Instant::now() + Duration::from_secs(10);
            let mut conn = loop {
                match server.accept() {
                    Ok((conn, _)) => break conn,
                    Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                    Err(e) => panic!("the client never connected: {e}"),
                }
            };
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let head = format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n");
            conn.write_all(head.as_bytes()).unwrap();
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = Client::new(&base, None);
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let err = rt.block_on(client.chat(&body, Instant::now() + Duration::from_secs(10))).unwrap_err().to_string();
        answer.join().unwrap();
        assert!(err.contains("HTTP 307") && err.contains("not followed"), "{err}");
        assert!(elsewhere.accept().is_err(), "the redirect's target was called");
    }

    /// A server that answers after `delay`, once: its address.
    fn slow_answer(delay: Duration) -> (String, std::thread::JoinHandle<()>) {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", server.local_addr().unwrap());
        let done = std::thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            std::thread::sleep(delay);
            let body =
                r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"late"},"finish_reason":"stop"}]}"#;
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body.as_bytes()));
        });
        (base, done)
    }

    /// Extends by `step` while it has extensions left, counting each question.
    struct Steps {
        left: u32,
        asked: u32,
        step: Duration,
    }

    impl Patience for Steps {
        fn extend(&mut self) -> Option<Instant> {
            self.asked += 1;
            (self.left > 0).then(|| {
                self.left -= 1;
                Instant::now() + self.step
            })
        }
    }

    #[test]
    fn a_transport_that_cannot_be_sent_is_the_matching_variant_and_never_shows_a_value() {
        let build = |t: Transport| Client::with_transport("http://127.0.0.1:1", None, &t).err();
        let pem = Transport { ca_pem: Some(b"no certificate here".to_vec()), ..Transport::default() };
        assert!(matches!(build(pem), Some(TransportError::NoCertificate)));
        let header =
            |name: &str, value: &str| Transport { headers: vec![(name.into(), value.into())], ..Transport::default() };
        let e = build(header("bad name", "v")).unwrap();
        assert!(matches!(&e, TransportError::HeaderName { name } if name == "bad name"), "{e:?}");
        assert_eq!(e.to_string(), "`bad name` is not a header name");
        let e = build(header(
            "X-Token",
            "secret
value",
        ))
        .unwrap();
        assert!(matches!(&e, TransportError::HeaderValue { name } if name == "x-token"), "{e:?}");
        assert_eq!(e.to_string(), "the value of header `x-token` has characters a header cannot carry");
        assert!(build(header("X-Token", "fine")).is_none());
    }

    /// Patience is asked at each passed deadline; what it extends is waited for, and when it stops extending the
    /// timeout names all the time waited.
    #[test]
    fn a_deadline_is_extended_only_as_far_as_patience_gives() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});

        let (base, server) = slow_answer(Duration::from_millis(600));
        let mut patience = Steps { left: 10, asked: 0, step: Duration::from_secs(5) };
        let deadline = Instant::now() + Duration::from_millis(200);
        let answer = rt.block_on(Client::new(&base, None).chat_patiently(&body, deadline, &mut patience)).unwrap();
        server.join().unwrap();
        assert_eq!(answer.content, "late");
        assert_eq!(patience.asked, 1, "asked at 0.2 s, extended to 5.2 s, answered at 0.6 s");

        let (base, server) = slow_answer(Duration::from_millis(1500));
        let mut patience = Steps { left: 1, asked: 0, step: Duration::from_millis(300) };
        let client = Client::new(&base, None);
        let asked = Instant::now();
        let deadline = asked + Duration::from_millis(200);
        let err = rt.block_on(client.chat_patiently(&body, deadline, &mut patience)).unwrap_err();
        let waited = asked.elapsed();
        server.join().unwrap();
        assert_eq!(patience.asked, 2);
        // Not at the first deadline but at the one extension's end, 0.5 s after the ask (the answer, 1.5 s late, was
        // not waited for: Err), and the error counts the time past the first deadline. (The error's seconds start
        // when the request is sent, which a loaded machine delays after `asked`: the wait itself is the measure.)
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        match err {
            ClientError::Timeout { seconds, during_body: false } => assert!(seconds > 0.2, "{seconds}"),
            other => panic!("{other:?}"),
        }

        // Without patience the first deadline ends it.
        let (base, server) = slow_answer(Duration::from_millis(700));
        let err = rt.block_on(Client::new(&base, None).chat(&body, Instant::now() + Duration::from_millis(200)));
        server.join().unwrap();
        assert!(matches!(err, Err(ClientError::Timeout { .. })), "{err:?}");
    }
}
