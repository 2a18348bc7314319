//! The operator API on PostgreSQL: each command of [`Admin`](crate::admin::Admin) and each statement
//! it runs are written once in `crate::admin` (`crate::admin::statements`); what PostgreSQL spells its
//! own way is here: statements lock the rows they decide on (`FOR UPDATE`), a span back from now binds
//! as seconds the statement subtracts from the database's `now()`, ids bind as an `int8[]`, and a write
//! wakes the replicas with `NOTIFY` (docs/operations.md, "Operator commands").

use chrono::{DateTime, Utc};
use sqlx::error::DatabaseError;
use sqlx::{PgConnection, Postgres};

use super::notify::notify;
use super::sql::clock::NOW;
use crate::admin::sql::{Dialect, SqlAdmin, Statements, unmigrated};
use crate::admin::statements::statements;
use crate::store::StoreError;

/// The operator commands on a PostgreSQL store's database, the [`Admin`](crate::admin::Admin) that
/// [`PgStore::admin`](super::PgStore::admin) makes.
pub(crate) type PgAdmin = SqlAdmin<Postgres>;

impl Dialect for Postgres {
    const SQL: Statements = statements! {
        lock: " FOR UPDATE",
        lock_jobs: " FOR UPDATE OF j",
        since_1: "now() - make_interval(secs => $1)",
        since_2: "now() - make_interval(secs => $2)",
        since_4: "now() - make_interval(secs => $4)",
        among_ids_1: "= ANY($1)",
        last_instant: "'infinity'::timestamptz",
        catch_up_ms: "CAST(extract(epoch FROM j.catch_up) * 1000 AS bigint)",
        jitter_ms: "(extract(epoch FROM j.jitter) * 1000)::bigint",
    };

    async fn clock(conn: &mut PgConnection) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query_scalar(NOW).fetch_one(conn).await
    }

    async fn notify(conn: &mut PgConnection, module: &str) -> Result<(), sqlx::Error> {
        notify(conn, module).await
    }

    /// An undefined table or column.
    fn unmigrated(error: &dyn DatabaseError) -> bool {
        matches!(error.code().as_deref(), Some("42P01" | "42703"))
    }
}

/// The error of a command's first statement, saying what to do when cronverb's tables are missing or
/// older than this code.
pub(in crate::store::postgres) fn admin_db(
    context: impl Into<String>,
) -> impl FnOnce(sqlx::Error) -> StoreError {
    let context = context.into();
    move |source| unmigrated::<Postgres>(&context)(source)
}
