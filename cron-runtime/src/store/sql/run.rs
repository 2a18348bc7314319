//! The statement runner of the SQL stores and of the operator API, once for every database: a step binds
//! and runs named statements here, generic over sqlx's [`Database`] the way sqlx itself is (an
//! [`Executor`], values that [`Encode`] with their [`Type`], rows read [`FromRow`]).
//!
//! sqlx states its bounds where a query runs; here they are traits ([`Bind`], [`Reads`], [`Run`], each
//! with a blanket impl) that a database's trait of statements names as supertraits
//! ([`Protocol`](super::Protocol) for the store's steps, the operator API's `Dialect`), so that the
//! generic code needs only that one bound, and a store's impl of it is where the compiler checks that
//! its driver binds and reads every value (docs/architecture.md).

use futures_util::future::BoxFuture;
use sqlx::database::HasStatementCache;
use sqlx::error::BoxDynError;
use sqlx::{Arguments, Database, Encode, Executor, FromRow, IntoArguments, Type};

/// A database that binds `T` as a statement's parameter: every `T` that is sqlx's [`Encode`] and
/// [`Type`] there.
pub(crate) trait Bind<T>: Database {
    /// Adds `value` to `arguments`.
    fn bind(arguments: &mut Self::Arguments<'static>, value: T) -> Result<(), BoxDynError>;
}

impl<DB: Database, T> Bind<T> for DB
where
    T: 'static + Send + Encode<'static, DB> + Type<DB>,
{
    fn bind(arguments: &mut DB::Arguments<'static>, value: T) -> Result<(), BoxDynError> {
        arguments.add(value)
    }
}

/// A database whose rows read as `R`: every `R` that is sqlx's [`FromRow`] there.
pub(crate) trait Reads<R>: Database {
    /// `row` as an `R`.
    fn read(row: &Self::Row) -> Result<R, sqlx::Error>;
}

impl<DB: Database, R> Reads<R> for DB
where
    R: for<'r> FromRow<'r, DB::Row>,
{
    fn read(row: &DB::Row) -> Result<R, sqlx::Error> {
        R::from_row(row)
    }
}

/// A database whose connections run statements: every one whose `&mut Connection` is sqlx's
/// [`Executor`].
pub(crate) trait Run: Database {
    /// The rows of `sql` with `arguments`, on `conn`.
    fn rows<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
        arguments: Self::Arguments<'static>,
        persistent: bool,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>, sqlx::Error>>;

    /// The first row of `sql` with `arguments`, if any, on `conn`.
    fn first_row<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
        arguments: Self::Arguments<'static>,
        persistent: bool,
    ) -> BoxFuture<'c, Result<Option<Self::Row>, sqlx::Error>>;

    /// Runs `sql` with `arguments` on `conn`.
    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
        arguments: Self::Arguments<'static>,
    ) -> BoxFuture<'c, Result<Self::QueryResult, sqlx::Error>>;
}

impl<DB: Database + HasStatementCache> Run for DB
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    fn rows<'c>(
        conn: &'c mut DB::Connection,
        sql: &'static str,
        arguments: DB::Arguments<'static>,
        persistent: bool,
    ) -> BoxFuture<'c, Result<Vec<DB::Row>, sqlx::Error>> {
        conn.fetch_all(sqlx::query_with(sql, Bound::<DB>(arguments)).persistent(persistent))
    }

    fn first_row<'c>(
        conn: &'c mut DB::Connection,
        sql: &'static str,
        arguments: DB::Arguments<'static>,
        persistent: bool,
    ) -> BoxFuture<'c, Result<Option<DB::Row>, sqlx::Error>> {
        conn.fetch_optional(sqlx::query_with(sql, Bound::<DB>(arguments)).persistent(persistent))
    }

    fn execute<'c>(
        conn: &'c mut DB::Connection,
        sql: &'static str,
        arguments: DB::Arguments<'static>,
    ) -> BoxFuture<'c, Result<DB::QueryResult, sqlx::Error>> {
        conn.execute(sqlx::query_with(sql, Bound::<DB>(arguments)))
    }
}

/// A database that says how many rows a statement changed (sqlx has no trait for it).
pub(crate) trait Affected: Database {
    /// How many rows the statement of `result` changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;
}

#[cfg(feature = "postgres")]
impl Affected for sqlx::Postgres {
    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }
}

#[cfg(feature = "sqlite")]
impl Affected for sqlx::Sqlite {
    fn rows_affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}

/// A statement's arguments, as sqlx's [`IntoArguments`] takes them.
struct Bound<DB: Database>(DB::Arguments<'static>);

impl<DB: Database> IntoArguments<'static, DB> for Bound<DB> {
    fn into_arguments(self) -> DB::Arguments<'static> {
        self.0
    }
}

/// One named statement with its parameters, bound in order.
pub(crate) struct Statement<D: Database> {
    sql: &'static str,
    arguments: D::Arguments<'static>,
    /// The first value that did not bind.
    unbound: Option<BoxDynError>,
    /// Whether the driver keeps the statement prepared on the connection ([`Statement::unprepared`]).
    persistent: bool,
}

impl<D: Run> Statement<D> {
    /// Statement `sql`, no parameter bound yet.
    pub(crate) fn new(sql: &'static str) -> Self {
        Statement {
            sql,
            arguments: Default::default(),
            unbound: None,
            persistent: true,
        }
    }

    /// Planned for its parameters at every execution rather than prepared once on the connection
    /// (sqlx's `persistent(false)`): for a statement whose best plan depends on the values bound.
    pub(crate) fn unprepared(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// Binds `value` as the next parameter.
    pub(crate) fn bind<T>(mut self, value: T) -> Self
    where
        D: Bind<T>,
    {
        if self.unbound.is_none()
            && let Err(error) = D::bind(&mut self.arguments, value)
        {
            self.unbound = Some(error);
        }
        self
    }

    fn arguments(self) -> Result<(&'static str, D::Arguments<'static>), sqlx::Error> {
        match self.unbound {
            Some(error) => Err(sqlx::Error::Encode(error)),
            None => Ok((self.sql, self.arguments)),
        }
    }

    /// Its rows, on `conn`.
    pub(crate) async fn fetch_all<R>(self, conn: &mut D::Connection) -> Result<Vec<R>, sqlx::Error>
    where
        D: Reads<R>,
    {
        let persistent = self.persistent;
        let (sql, arguments) = self.arguments()?;
        D::rows(conn, sql, arguments, persistent)
            .await?
            .iter()
            .map(D::read)
            .collect()
    }

    /// Its first row, if any, on `conn`.
    pub(crate) async fn fetch_optional<R>(
        self,
        conn: &mut D::Connection,
    ) -> Result<Option<R>, sqlx::Error>
    where
        D: Reads<R>,
    {
        let persistent = self.persistent;
        let (sql, arguments) = self.arguments()?;
        D::first_row(conn, sql, arguments, persistent)
            .await?
            .as_ref()
            .map(D::read)
            .transpose()
    }

    /// Its first row, on `conn`; none is [`sqlx::Error::RowNotFound`].
    pub(crate) async fn fetch_one<R>(self, conn: &mut D::Connection) -> Result<R, sqlx::Error>
    where
        D: Reads<R>,
    {
        self.fetch_optional(conn)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    /// Runs it on `conn`; returns how many rows it changed.
    pub(crate) async fn execute(self, conn: &mut D::Connection) -> Result<u64, sqlx::Error>
    where
        D: Affected,
    {
        let (sql, arguments) = self.arguments()?;
        Ok(D::rows_affected(&D::execute(conn, sql, arguments).await?))
    }
}
