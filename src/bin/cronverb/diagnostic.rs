//! Rendering of an invalid expression as rustc renders a compile error: the message, then the expression
//! with a caret line under the offending text.
//!
//! ```text
//! error: `MON` is not supported in the day-of-week field; write `1` instead
//!   |
//! 1 | 0 9 * * MON
//!   |         ^^^
//! ```
//!
//! Columns are counted in characters. A tab is shown as four spaces and other control characters in their
//! escaped form (`\n`), so the carets line up whatever the terminal's tab stops are.

use std::fmt;

/// What the user typed is wrong; the message is ready to print. The process exits with status 2.
#[derive(Debug)]
pub struct InvalidInput(String);

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidInput {}

/// Renders `error` with a caret line under its span inside `expression` (`cron_schema::Error::render`,
/// which the dashboard shows too).
pub fn render(expression: &str, error: &cron_schema::Error) -> InvalidInput {
    InvalidInput(error.render(expression))
}
