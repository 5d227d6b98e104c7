//! The client's one error type: each way a request or its answer can go wrong, as a finding names it. Made by the
//! HTTP clients and the parser alike; it depends on neither, and never carries a request's secret headers.

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    #[error("timed out after {seconds:.1}s{}", if *.during_body { " while reading the answer" } else { " waiting for the first byte" })]
    Timeout { seconds: f64, during_body: bool },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("HTTP {status} from {url}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("wrong content type `{got}` (expected {expected})")]
    ContentType { got: String, expected: &'static str },
    #[error("malformed answer: {0}")]
    Malformed(String),
    #[error("stream ended without `data: [DONE]`")]
    MissingDone,
    /// A server that ends its streams by closing the body after the finish chunk (never `[DONE]`: the kind says so)
    /// closed it before any chunk carried a `finish_reason`.
    #[error("stream ended before a chunk with a `finish_reason` (this engine sends no `data: [DONE]`)")]
    MissingFinish,
    #[error("response larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("transport error: {0}")]
    Transport(String),
    /// The request went out on a pooled connection the server had already closed, so the server never saw it
    /// (servers that close after each streamed answer make this race likely). [`super::Client::chat`] sends it again once.
    #[error("the server had closed the connection before the request: {0}")]
    ClosedBeforeRequest(String),
}
