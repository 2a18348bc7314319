//! The values the SQL stores' statements bind and read whose encoding each driver gives: an instant
//! ([`At`]), a span ([`Span`], [`Ago`]), ids ([`Ids`]), a column of values bound as one parameter
//! ([`Column`]) and the columns of a batch bound together ([`Rows`]): PostgreSQL binds an array per
//! column that the statement reads with `unnest`, SQLite JSON text that the statement reads with
//! `json_each`. The impls live with each driver (`store/postgres/values.rs`, `store/sqlite/values.rs`).

use std::time::Duration;

use chrono::{DateTime, Utc};

/// An instant as a statement binds and reads it: a `timestamptz` on PostgreSQL, microseconds since the
/// Unix epoch on SQLite (each store's admin module implements its encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At(pub(crate) DateTime<Utc>);

impl From<At> for DateTime<Utc> {
    fn from(at: At) -> DateTime<Utc> {
        at.0
    }
}

/// A span back from the store's clock, for "within the liveness window" or "finished long ago": on
/// PostgreSQL seconds that the statement subtracts from the database's `now()`, on SQLite the instant
/// the store's clock gives less the span, read as the statement is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ago(pub(crate) Duration);

/// Ids bound as one parameter: an `int8[]` on PostgreSQL, a JSON array that `json_each` reads on SQLite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ids(pub(crate) Vec<i64>);

/// A duration the statement adds to the store's clock (a lease): on PostgreSQL seconds that the
/// statement adds to `now()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span(pub(crate) Duration);

/// One value per row of a batch, bound as one parameter: an array on PostgreSQL, which the statement
/// reads with `unnest`, so that a batch of any size is one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column<T>(pub(crate) Vec<T>);

impl<T> FromIterator<T> for Column<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Column(iter.into_iter().collect())
    }
}

/// The columns of a batch, bound together, after a statement's other parameters: a tuple of
/// [`Column`]s of one length, the values of row `i` at index `i` of each. PostgreSQL binds each column
/// as its own array, which the statement reads with one `unnest`. SQLite binds one JSON array of rows,
/// each row the array of its values, which the statement reads with one `json_each` and `value ->> n`
/// (reading a column at the index of another is a walk of its array per row, O(n²) in the batch).
/// Last, so that the parameters before it have the same numbers on both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rows<T>(pub(crate) T);
