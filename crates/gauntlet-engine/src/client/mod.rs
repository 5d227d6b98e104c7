//! OpenAI-compatible client: requests out, timestamped answers in. Never writes to the terminal.

mod http;
mod parse;
pub mod wire;

pub use http::{Client, ClientError, DEFAULT_MAX_RESPONSE_BYTES};
pub use parse::{StreamAssembler, parse_completion};
