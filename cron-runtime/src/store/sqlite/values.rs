//! How SQLite's driver binds and reads the SQL stores' values (`store/sql/values.rs`): an instant is
//! microseconds since the Unix epoch, a span microseconds, a span back from now the instant the store's
//! clock gives less it, ids and a column the JSON array that the statement reads with `json_each`
//! (SQLite has no array parameters), and the columns of a batch one JSON array of rows ([`Rows`]).

use serde_json::Value;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::sqlite::{SqliteArgumentValue, SqliteArguments, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Arguments, Decode, Encode, Sqlite, Type};

use super::{instant, micros, micros_of, now};
use crate::store::sql::run::Bind;
use crate::store::sql::values::{Ago, At, Column, Ids, Rows, Span};

/// Each value binds as the SQLite value `$as` its function gives.
macro_rules! bind_as {
    ($($value:ty => $as:ty: |$v:ident| $to:expr;)+) => {$(
        impl Type<Sqlite> for $value {
            fn type_info() -> SqliteTypeInfo {
                <$as as Type<Sqlite>>::type_info()
            }

            fn compatible(ty: &SqliteTypeInfo) -> bool {
                <$as as Type<Sqlite>>::compatible(ty)
            }
        }

        impl<'q> Encode<'q, Sqlite> for $value {
            fn encode_by_ref(
                &self,
                buf: &mut Vec<SqliteArgumentValue<'q>>,
            ) -> Result<IsNull, BoxDynError> {
                let $v = self;
                <$as as Encode<Sqlite>>::encode($to, buf)
            }
        }
    )+};
}

bind_as! {
    // An instant is microseconds since the Unix epoch.
    At => i64: |at| micros(at.0);
    // A span back from now is the instant the store's clock gives less the span.
    Ago => i64: |ago| micros(now()) - micros_of(ago.0);
    // A span is microseconds, which the statement adds to the instant it starts from.
    Span => i64: |span| micros_of(span.0);
    // Ids are the JSON array that `json_each` reads.
    Ids => String: |ids| Value::from(ids.0.as_slice()).to_string();
}

impl Decode<'_, Sqlite> for At {
    fn decode(value: SqliteValueRef<'_>) -> Result<At, BoxDynError> {
        Ok(At(instant(<i64 as Decode<Sqlite>>::decode(value)?)))
    }
}

/// A value of a [`Column`] or a row of [`Rows`] as JSON: what `json_each` gives back as its `value`,
/// and `->>` from a row (an instant as microseconds, a flag as 0 or 1, a missing value as `null`).
pub(crate) trait Cell {
    /// The value in JSON.
    fn json(&self) -> Value;
}

/// Each value is its JSON as its function gives it.
macro_rules! cell {
    ($($value:ty: |$v:ident| $json:expr;)+) => {$(
        impl Cell for $value {
            fn json(&self) -> Value {
                let $v = self;
                $json
            }
        }
    )+};
}

cell! {
    i64: |v| Value::from(*v);
    i32: |v| Value::from(*v);
    f64: |v| Value::from(*v);
    bool: |v| Value::from(i64::from(*v));
    String: |v| Value::from(v.as_str());
    &str: |v| Value::from(*v);
    At: |v| Value::from(micros(v.0));
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

/// The columns of a batch are one JSON array of rows, each the array of its values.
macro_rules! bind_rows {
    ($first:ident: $head:ident $(, $column:ident: $value:ident)*) => {
        impl<$head: Cell $(, $value: Cell)*> Bind<Rows<(Column<$head>, $(Column<$value>,)*)>>
            for Sqlite
        {
            fn bind(
                arguments: &mut SqliteArguments<'static>,
                Rows(($first, $($column,)*)): Rows<(Column<$head>, $(Column<$value>,)*)>,
            ) -> Result<(), BoxDynError> {
                let rows: Vec<Value> = $first
                    .0
                    .iter()
                    .enumerate()
                    .map(|(_i, first)| {
                        Value::Array(vec![
                            first.json(),
                            $($column.0.get(_i).map_or(Value::Null, Cell::json),)*
                        ])
                    })
                    .collect();
                arguments.add(Value::Array(rows).to_string())
            }
        }
    };
}

bind_rows!(a: A, b: B);
bind_rows!(a: A, b: B, c: C);
bind_rows!(a: A, b: B, c: C, d: D);
bind_rows!(a: A, b: B, c: C, d: D, e: E);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L, m: M, n: N);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L, m: M, n: N, o: O, p: P);
bind_rows!(a: A, b: B, c: C, d: D, e: E, f: F, g: G, h: H, i: I, j: J, k: K, l: L, m: M, n: N, o: O, p: P, q: Q);

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use sqlx::{Connection, SqliteConnection};

    use super::*;
    use crate::store::sql::run::Statement;

    /// A batch's rows read back as a batch-shaped statement reads them: one `json_each`, each value at
    /// its column's index.
    #[tokio::test]
    async fn rows_bind_as_one_json_array_that_json_each_reads_in_order() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let at = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        // Each row's values, and the parameter bound before the batch.
        type Read = (i64, Option<i64>, Option<String>, bool, i64);
        let rows: Vec<Read> = Statement::<Sqlite>::new(
            "SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, ?1 FROM json_each(?2)
             ORDER BY key",
        )
        .bind(7_i64)
        .bind(Rows((
            Column(vec![3_i64, 1, 2]),
            Column(vec![Some(At(at)), None, Some(At(at))]),
            Column(vec![
                None,
                Some("it said \"no\"".to_owned()),
                Some("é".to_owned()),
            ]),
            Column(vec![true, false, true]),
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            rows,
            vec![
                (3, Some(micros(at)), None, true, 7),
                (1, None, Some("it said \"no\"".to_owned()), false, 7),
                (2, Some(micros(at)), Some("é".to_owned()), true, 7),
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
