//! The HTML pages: a gate run (`report.html`), a baseline's history, and the shared pieces every page (the
//! qualification's and the bench's too) draws with: escaping, the style sheet, inline SVG charts.

pub(crate) mod chart;
mod history;
pub(crate) mod page;
mod run;

pub use history::{HistoryPoint, IdentityHistory, history_page};
pub use run::render as run_page;
