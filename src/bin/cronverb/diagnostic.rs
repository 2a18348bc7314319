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
use std::ops::Range;

/// What the user typed is wrong; the message is ready to print. The process exits with status 2.
#[derive(Debug)]
pub struct InvalidInput(String);

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidInput {}

/// Renders `error` with a caret line under its span inside `expression`.
pub fn render(expression: &str, error: &cron_schema::Error) -> InvalidInput {
    let (source, carets) = underline(expression, error.span());
    InvalidInput(format!(
        "error: {error}\n  |\n{}\n{}",
        format!("1 | {source}").trim_end(),
        format!("  | {carets}").trim_end(),
    ))
}

/// The expression as displayed, and the line of carets that goes under `span` (a byte range).
fn underline(expression: &str, span: Range<usize>) -> (String, String) {
    let mut source = String::new();
    let mut carets = String::new();
    // The column of `span.start`, for an empty span or one that starts past the end.
    let mut start_column = None;
    let mut column = 0;
    for (offset, ch) in expression.char_indices() {
        if start_column.is_none() && offset + ch.len_utf8() > span.start {
            start_column = Some(column);
        }
        let shown = shown(ch);
        let width = shown.chars().count();
        let inside = offset < span.end && offset + ch.len_utf8() > span.start;
        carets.extend(std::iter::repeat_n(if inside { '^' } else { ' ' }, width));
        source.push_str(&shown);
        column += width;
    }
    if !carets.contains('^') {
        let column = start_column.unwrap_or(column);
        carets = format!("{}^", " ".repeat(column));
    }
    (source, carets)
}

fn shown(ch: char) -> String {
    match ch {
        '\t' => "    ".to_owned(),
        ch => crate::escape::escape(ch.encode_utf8(&mut [0; 4])).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::underline;

    #[test]
    fn carets_go_under_the_span() {
        let (source, carets) = underline("0 9 * * MON", 8..11);
        assert_eq!(source, "0 9 * * MON");
        assert_eq!(carets, "        ^^^");
    }

    #[test]
    fn tabs_are_expanded_in_both_lines() {
        let (source, carets) = underline("0\t9 * * MON", 8..11);
        assert_eq!(source, "0    9 * * MON");
        assert_eq!(carets, "           ^^^");
    }

    #[test]
    fn an_empty_span_gets_one_caret() {
        assert_eq!(underline("1,", 2..2).1, "  ^");
        assert_eq!(underline("", 0..0).1, "^");
        assert_eq!(underline("a b", 1..1).1, " ^");
    }

    #[test]
    fn non_ascii_counts_one_column_per_character() {
        // `é` is two bytes; the carets stay under `X`.
        let (source, carets) = underline("é X", 3..4);
        assert_eq!(source, "é X");
        assert_eq!(carets, "  ^");
    }

    #[test]
    fn control_characters_are_escaped() {
        let (source, carets) = underline("0\n9", 2..3);
        assert_eq!(source, "0\\n9");
        assert_eq!(carets, "   ^");
    }
}
