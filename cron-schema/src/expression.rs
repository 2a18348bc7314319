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
    pub(crate) year: Option<FieldValues>,
}

/// One field: the set of values its items allow, and the two facts about its text that change what it
/// means or how it is written back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldValues {
    /// Bit `value - YEAR_ORIGIN` for each allowed year, bit `value` for each allowed value of the other
    /// fields (which all fit in the first word).
    pub(crate) bits: [u64; 3],
    /// Every item is a single number: no `*`, range or step.
    pub(crate) plain: bool,
    /// The field's text starts with `*` (docs/expressions.md, "The day rule").
    pub(crate) star: bool,
}

/// The year of bit 0 in a year field's [`FieldValues::bits`].
pub(crate) const YEAR_ORIGIN: u32 = 1970;

impl FieldValues {
    /// The first word of the set: every value of a field other than the year.
    pub(crate) fn low(&self) -> u64 {
        self.bits[0]
    }
}
