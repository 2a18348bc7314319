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
    /// The expression has fewer than 5 or more than 7 fields.
    #[error(
        "expected 5, 6 or 7 fields (`minute hour day-of-month month day-of-week`, optionally with `second` first and `year` last), found {found}"
    )]
    FieldCount { found: usize, span: Range<usize> },

    /// An item of a comma list is empty (`1,,2`, a trailing comma).
    #[error("empty item in the {field} field `{text}`")]
    EmptyItem {
        field: Field,
        text: String,
        span: Range<usize>,
    },

    /// A value outside the field's bounds.
    #[error("`{text}` is out of range in the {field} field; expected a value from {min} to {max}")]
    OutOfRange {
        field: Field,
        text: String,
        min: u32,
        max: u32,
        span: Range<usize>,
    },

    /// A step of zero (`*/0`).
    #[error("step `{text}` in the {field} field must be at least 1")]
    ZeroStep {
        field: Field,
        text: String,
        span: Range<usize>,
    },

    /// A range whose start is after its end (`5-1`).
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
    #[error("`{text}` is not supported in the {field} field{}", help_suffix(.suggestion))]
    Unsupported {
        field: Field,
        text: String,
        suggestion: Option<String>,
        span: Range<usize>,
    },

    /// An `@hourly`-style macro.
    #[error("`{text}` macros are not supported{}", help_suffix(.suggestion))]
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

    /// A well-formed expression with no occurrence between 2020-01-01 and 2099-12-31.
    #[error("`{text}` never fires between 2020-01-01 and 2099-12-31")]
    NeverFires { text: String, span: Range<usize> },
}

fn help_suffix(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; write `{s}` instead"),
        None => String::new(),
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
