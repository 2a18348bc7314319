//! A cron expression as the grammar reads it: for each field, the values it allows and how it was written.
//!
//! The parser (`parse.rs`) produces it and knows nothing of [`Schedule`](crate::Schedule); the schedule
//! builds its own representation from it (`schedule.rs`). Neither imports the other.

use std::ops::Range;

/// The fields of one valid expression, in the order they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expression {
    /// The byte range of the expression without its surrounding blanks.
    pub(crate) span: Range<usize>,
    /// `None` for 5 fields.
    pub(crate) second: Option<FieldValues>,
    pub(crate) minute: FieldValues,
    pub(crate) hour: FieldValues,
    pub(crate) day_of_month: FieldValues,
    pub(crate) month: FieldValues,
    /// Values 0 to 7, both 0 and 7 standing for Sunday as written.
    pub(crate) day_of_week: FieldValues,
    /// `None` for 5 and 6 fields.
    pub(crate) year: Option<Years>,
}

/// One field other than the year: the set of values its items allow, and the two facts about its text
/// that change what it means or how it is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldValues {
    /// Bit `value` for each allowed value (every field but the year has values below 64).
    pub(crate) bits: u64,
    /// Every item is a single number: no `*`, range or step.
    pub(crate) plain: bool,
    /// The field's text starts with `*` (docs/expressions.md, "The day rule").
    pub(crate) star: bool,
}

/// The year field: bit `year - YEAR_ORIGIN` for each allowed year.
pub(crate) type Years = [u64; 3];

/// The year of bit 0 in [`Years`].
pub(crate) const YEAR_ORIGIN: u32 = 1970;

impl FieldValues {
    /// No value, written as a list of numbers.
    pub(crate) const NONE: FieldValues = FieldValues {
        bits: 0,
        plain: true,
        star: false,
    };
}
