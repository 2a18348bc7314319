//! How SQLite's driver binds and reads the SQL stores' values (`store/sql/values.rs`): an instant is
//! microseconds since the Unix epoch, a span microseconds, a span back from now the instant the store's
//! clock gives less it, and ids and columns the JSON array that the statement reads with `json_each`
//! (SQLite has no array parameters): `json_each(?)` yields one row per value, in order, `key` its index.

use serde_json::Value;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::sqlite::{SqliteArgumentValue, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Sqlite, Type};

use super::{instant, micros, micros_of, now};
use crate::store::sql::values::{Ago, At, Column, Ids, Span};

/// An instant is microseconds since the Unix epoch.
impl Type<Sqlite> for At {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <i64 as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for At {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Sqlite>>::encode(micros(self.0), buf)
    }
}

impl Decode<'_, Sqlite> for At {
    fn decode(value: SqliteValueRef<'_>) -> Result<At, BoxDynError> {
        Ok(At(instant(<i64 as Decode<Sqlite>>::decode(value)?)))
    }
}

/// A span back from now is the instant the store's clock gives less the span.
impl Type<Sqlite> for Ago {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Ago {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Sqlite>>::encode(micros(now()) - micros_of(self.0), buf)
    }
}

/// Ids are the JSON array that `json_each` reads: SQLite has no array parameters.
impl Type<Sqlite> for Ids {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Ids {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        let ids: Vec<String> = self.0.iter().map(i64::to_string).collect();
        <String as Encode<Sqlite>>::encode(format!("[{}]", ids.join(",")), buf)
    }
}
/// A span is microseconds, which the statement adds to the instant it starts from.
impl Type<Sqlite> for Span {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Span {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<Sqlite>>::encode(micros_of(self.0), buf)
    }
}

/// A value of a [`Column`] as the JSON array holds it: what `json_each` gives back as its `value` (an
/// instant as microseconds, a flag as 0 or 1, a missing value as `null`).
pub(crate) trait Cell {
    /// The value in JSON.
    fn json(&self) -> Value;
}

impl Cell for i64 {
    fn json(&self) -> Value {
        Value::from(*self)
    }
}

impl Cell for i32 {
    fn json(&self) -> Value {
        Value::from(*self)
    }
}

impl Cell for f64 {
    fn json(&self) -> Value {
        Value::from(*self)
    }
}

impl Cell for bool {
    fn json(&self) -> Value {
        Value::from(i64::from(*self))
    }
}

impl Cell for String {
    fn json(&self) -> Value {
        Value::from(self.as_str())
    }
}

impl Cell for &str {
    fn json(&self) -> Value {
        Value::from(*self)
    }
}

impl Cell for At {
    fn json(&self) -> Value {
        Value::from(micros(self.0))
    }
}

impl<T: Cell> Cell for Option<T> {
    fn json(&self) -> Value {
        self.as_ref().map_or(Value::Null, Cell::json)
    }
}

/// A column is the JSON array of its values.
impl<T: Cell> Type<Sqlite> for Column<T> {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q, T: Cell> Encode<'q, Sqlite> for Column<T> {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        let values: Vec<Value> = self.0.iter().map(Cell::json).collect();
        <String as Encode<Sqlite>>::encode(Value::Array(values).to_string(), buf)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use sqlx::{Connection, SqliteConnection};

    use super::*;

    /// A batch's columns read back row by row, as a batch-shaped statement reads them: `json_each` over
    /// each column, joined on the index.
    #[tokio::test]
    async fn columns_bind_as_json_arrays_that_json_each_reads_in_order() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let at = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let rows: Vec<(i64, Option<i64>, Option<String>, bool)> = sqlx::query_as(
            "SELECT i.value, t.value, e.value, f.value
             FROM json_each(?1) i JOIN json_each(?2) t ON t.key = i.key
             JOIN json_each(?3) e ON e.key = i.key JOIN json_each(?4) f ON f.key = i.key
             ORDER BY i.key",
        )
        .bind(Column(vec![3_i64, 1, 2]))
        .bind(Column(vec![Some(At(at)), None, Some(At(at))]))
        .bind(Column(vec![
            None,
            Some("it said \"no\"".to_owned()),
            Some("é".to_owned()),
        ]))
        .bind(Column(vec![true, false, true]))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            rows,
            vec![
                (3, Some(micros(at)), None, true),
                (1, None, Some("it said \"no\"".to_owned()), false),
                (2, Some(micros(at)), Some("é".to_owned()), true),
            ]
        );
        let (lease,): (i64,) = sqlx::query_as("SELECT ?1 + ?2")
            .bind(At(at))
            .bind(Span(std::time::Duration::from_millis(1500)))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(lease, micros(at) + 1_500_000);
    }
}
