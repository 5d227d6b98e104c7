//! Views of a run record: Markdown, JUnit, GitHub annotations. Each is a pure function of the record.

mod github;
pub(crate) mod junit;
mod markdown;
pub mod merge;

pub use github::{annotation as github_annotation, annotations as github_annotations};
pub use junit::render as junit;
pub use markdown::render as markdown;
