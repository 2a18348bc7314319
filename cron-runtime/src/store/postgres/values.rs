//! How PostgreSQL's driver binds and reads the SQL stores' values (`store/sql/values.rs`): an instant is
//! a `timestamptz`, a span is seconds the statement adds to or subtracts from `now()`, ids and columns
//! are arrays that the statement reads with `unnest` or `= ANY`.

use chrono::{DateTime, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgHasArrayType, PgTypeInfo, PgValueRef};
use sqlx::{Arguments, Decode, Encode, Postgres, Type};

use crate::store::sql::run::Bind;
use crate::store::sql::values::{Ago, At, Column, Ids, Rows, Span};

/// An instant is a `timestamptz`.
impl Type<Postgres> for At {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for At {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl Decode<'_, Postgres> for At {
    fn decode(value: PgValueRef<'_>) -> Result<At, BoxDynError> {
        Ok(At(<DateTime<Utc> as Decode<Postgres>>::decode(value)?))
    }
}

/// A span back from now is seconds, which the statement subtracts from the database's `now()`.
impl Type<Postgres> for Ago {
    fn type_info() -> PgTypeInfo {
        <f64 as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Ago {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <f64 as Encode<Postgres>>::encode_by_ref(&self.0.as_secs_f64(), buf)
    }
}

/// Ids are an `int8[]`.
impl Type<Postgres> for Ids {
    fn type_info() -> PgTypeInfo {
        <Vec<i64> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Ids {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <Vec<i64> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

/// Instants bind in arrays too ([`Column`]).
impl PgHasArrayType for At {
    fn array_type_info() -> PgTypeInfo {
        <DateTime<Utc> as PgHasArrayType>::array_type_info()
    }
}

/// A span is seconds, which the statement adds to the database's `now()`.
impl Type<Postgres> for Span {
    fn type_info() -> PgTypeInfo {
        <f64 as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Span {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <f64 as Encode<Postgres>>::encode_by_ref(&self.0.as_secs_f64(), buf)
    }
}

/// A column is an array, of the type of its values.
impl<T> Type<Postgres> for Column<T>
where
    Vec<T>: Type<Postgres>,
{
    fn type_info() -> PgTypeInfo {
        <Vec<T> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <Vec<T> as Type<Postgres>>::compatible(ty)
    }
}

impl<'q, T> Encode<'q, Postgres> for Column<T>
where
    Vec<T>: Encode<'q, Postgres>,
{
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <Vec<T> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

/// The columns of a batch are an array each, bound in order: the statement reads them with one `unnest`.
macro_rules! bind_rows {
    ($($column:ident: $value:ident),+) => {
        impl<$($value),+> Bind<Rows<($(Column<$value>,)+)>> for Postgres
        where
            $(Column<$value>: 'static + Send + Encode<'static, Postgres> + Type<Postgres>,)+
        {
            fn bind(
                arguments: &mut PgArguments,
                Rows(($($column,)+)): Rows<($(Column<$value>,)+)>,
            ) -> Result<(), BoxDynError> {
                $(arguments.add($column)?;)+
                Ok(())
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
