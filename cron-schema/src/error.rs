use std::ops::Range;

use crate::Field;

/// Why an expression was rejected.
///
/// Every variant carries the byte range of the offending text inside the expression (`span`), so that the
/// macro, the command-line tool and the runtime can all point at it. The `Display` form is one lowercase
/// sentence, with the user's own text in backticks and, where one exists, what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The expression has fewer than 5 or more than 7 fields. `span` covers the whole expression without
    /// surrounding blanks (all of it when it is blank).
    #[error(
        "expected 5, 6 or 7 fields (`minute hour day-of-month month day-of-week`, optionally with `second` first and `year` last), found {found}"
    )]
    FieldCount { found: usize, span: Range<usize> },

    /// An item of a comma list is empty (`1,,2`, a trailing comma). `text` is the whole field; `span` covers
    /// the comma that has no item on one side (the one after the empty item, or the trailing one).
    #[error("empty item in the {field} field `{text}`; remove the extra comma")]
    EmptyItem {
        field: Field,
        text: String,
        span: Range<usize>,
    },

    /// A value outside the field's bounds. `text` and `span` are the number's.
    #[error("`{text}` is out of range in the {field} field; expected a value from {min} to {max}")]
    OutOfRange {
        field: Field,
        text: String,
        min: u32,
        max: u32,
        span: Range<usize>,
    },

    /// A step of zero (`*/0`). `text` and `span` are the item's.
    #[error("the step of `{text}` in the {field} field must be at least 1")]
    ZeroStep {
        field: Field,
        text: String,
        span: Range<usize>,
    },

    /// A range whose start is after its end (`5-1`). `text` and `span` are the range's, without a step.
    #[error(
        "range `{text}` in the {field} field starts after it ends; write `{suggestion}` or split it into two ranges"
    )]
    ReversedRange {
        field: Field,
        text: String,
        suggestion: String,
        span: Range<usize>,
    },

    /// Syntax from other cron dialects that cronverb does not accept: `?`, `L`, `W`, `#`, month and weekday
    /// names. `suggestion` says what to write instead, where there is an equivalent.
    #[error("`{text}` is not supported in the {field} field{}", unsupported_help(.suggestion))]
    Unsupported {
        field: Field,
        text: String,
        suggestion: Option<String>,
        span: Range<usize>,
    },

    /// An `@hourly`-style macro. `suggestion` is the 5-field equivalent, when there is one.
    #[error("macro `{text}` is not supported{}", macro_help(.text, .suggestion))]
    Macro {
        text: String,
        suggestion: Option<String>,
        span: Range<usize>,
    },

    /// Text that is not a number, range, step or `*`.
    #[error(
        "`{text}` is not a valid {field} item; expected `*`, `N`, `N-M`, `*/S`, `N-M/S` or `N/S`"
    )]
    Invalid {
        field: Field,
        text: String,
        span: Range<usize>,
    },

    /// A well-formed expression with no occurrence between 2020-01-01 and 2099-12-31. `text` and `span` are
    /// the whole expression without surrounding blanks.
    #[error(
        "`{text}` never fires between 2020-01-01 and 2099-12-31; check the day-of-month, month and year fields"
    )]
    NeverFires { text: String, span: Range<usize> },
}

fn unsupported_help(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; write `{s}` instead"),
        None => {
            "; cronverb accepts `*`, numbers, ranges `N-M`, steps `/S` and comma lists".to_owned()
        }
    }
}

fn macro_help(text: &str, suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; write `{s}` instead"),
        None if text.eq_ignore_ascii_case("@reboot") => {
            "; cronverb jobs run on a schedule, not when the application starts".to_owned()
        }
        None => "; write the 5-field expression instead".to_owned(),
    }
}

impl Error {
    /// The error as `cronverb check` prints it, as rustc renders a compile error: the message, then
    /// `expression` with a line of carets under the offending text. Columns are counted in characters;
    /// a tab is shown as four spaces and other control characters (and bidirectional overrides) in their
    /// escaped form (`\n`), so that the carets line up and the text cannot act on a terminal.
    ///
    /// ```text
    /// error: `MON` is not supported in the day-of-week field; write `1` instead
    ///   |
    /// 1 | 0 9 * * MON
    ///   |         ^^^
    /// ```
    pub fn render(&self, expression: &str) -> String {
        let (source, carets) = underline(expression, self.span());
        format!(
            "error: {self}\n  |\n{}\n{}",
            format!("1 | {source}").trim_end(),
            format!("  | {carets}").trim_end(),
        )
    }

    /// The byte range of the offending text inside the expression.
    pub fn span(&self) -> Range<usize> {
        match self {
            Error::FieldCount { span, .. }
            | Error::EmptyItem { span, .. }
            | Error::OutOfRange { span, .. }
            | Error::ZeroStep { span, .. }
            | Error::ReversedRange { span, .. }
            | Error::Unsupported { span, .. }
            | Error::Macro { span, .. }
            | Error::Invalid { span, .. }
            | Error::NeverFires { span, .. } => span.clone(),
        }
    }

    /// The field the error is in, when it is in one.
    pub fn field(&self) -> Option<Field> {
        match self {
            Error::EmptyItem { field, .. }
            | Error::OutOfRange { field, .. }
            | Error::ZeroStep { field, .. }
            | Error::ReversedRange { field, .. }
            | Error::Unsupported { field, .. }
            | Error::Invalid { field, .. } => Some(*field),
            Error::FieldCount { .. } | Error::Macro { .. } | Error::NeverFires { .. } => None,
        }
    }
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

/// A character as [`Error::render`] shows it: a tab as four spaces, a control character or a
/// bidirectional embedding, override or isolate as its Rust escape, any other as itself.
fn shown(ch: char) -> String {
    match ch {
        '\t' => "    ".to_owned(),
        ch if ch.is_control()
            || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
        {
            ch.escape_default().to_string()
        }
        ch => ch.to_string(),
    }
}

#[cfg(test)]
mod render_tests {
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
        let (source, _) = underline("0\u{1b}\u{202e}9", 0..1);
        assert_eq!(source, "0\\u{1b}\\u{202e}9");
    }
}
