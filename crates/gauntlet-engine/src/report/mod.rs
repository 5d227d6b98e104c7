//! Views of a run record: Markdown, HTML, JUnit, GitHub annotations. Each is a pure function of the record.

mod github;
pub mod html;
pub(crate) mod junit;
pub(crate) mod markdown;
pub mod merge;

pub use github::{annotation as github_annotation, annotations as github_annotations};
pub use html::{HistoryPoint, IdentityHistory, history_page, run_page as html};
pub use junit::render as junit;
pub use markdown::render as markdown;
