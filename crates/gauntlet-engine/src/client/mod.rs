//! OpenAI-compatible client: requests out, timestamped answers in. Never writes to the terminal.

mod error;
mod http;
mod parse;
pub mod tokens;
pub mod wire;

pub use error::ClientError;
pub use http::{Client, DEFAULT_MAX_RESPONSE_BYTES, Described, Impatient, Patience, Transport, TransportError};
pub use parse::{StreamAssembler, error_message, parse_completion};
pub use tokens::{TOKEN_DIALECTS, Thinking, TokenDialect};
