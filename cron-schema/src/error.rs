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
