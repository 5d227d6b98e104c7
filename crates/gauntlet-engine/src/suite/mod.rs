//! Cases and checks. The default suite is data (`default.toml`), embedded in the binary; users point at their own.

mod cases;
mod checks;
mod needle;

pub use cases::{Case, Check, Field, Message, OWNED_REQUEST_KEYS, Suite, SuiteError, ToolCallCheck, extra_body};
pub(crate) use cases::{compile_schema, response_format};
pub(crate) use checks::schema_failure_with;
pub use checks::{evaluate, observed_text};
