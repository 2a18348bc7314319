//! The store conformance suite (tests/conformance) against the PostgreSQL store: one fresh database per
//! case (`#[sqlx::test]`, which needs `DATABASE_URL`; scripts/test sets it), on the database's clock.

use chrono::{DateTime, Utc};
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{Attempt, Outcome, StoreError, StoreSettings};
use sqlx::PgPool;

use conformance::{RunView, StoreUnderTest};

mod conformance;
mod support;

/// One database; each replica of a case is a store of its own on its pool, as in its own process.
struct Postgres {
    pool: PgPool,
}

/// A row of `cron_job_runs`.
#[derive(sqlx::FromRow)]
struct RunRow {
    id: i64,
    verb: String,
    scheduled_at: DateTime<Utc>,
    claimed_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    outcome: String,
    error: Option<String>,
    runner: String,
    skipped: i32,
    manual: bool,
    backfill: bool,
    attempts: Option<sqlx::types::Json<Vec<Attempt>>>,
}

fn outcome(text: &str) -> Option<Outcome> {
    Some(match text {
        "running" => return None,
        "succeeded" => Outcome::Succeeded,
        "failed" => Outcome::Failed,
        "panicked" => Outcome::Panicked,
        "timed_out" => Outcome::TimedOut,
        "cancelled" => Outcome::Cancelled,
        "abandoned" => Outcome::Abandoned,
        "skipped" => Outcome::Skipped,
        other => panic!("unknown outcome `{other}`"),
    })
}

impl StoreUnderTest for Postgres {
    type Store = PgStore;

    const HEARTBEAT_HINTS: bool = true;

    fn with_settings(&self, settings: StoreSettings) -> Result<PgStore, StoreError> {
        PgStore::from_pool(self.pool.clone()).with_settings(settings)
    }

    async fn now(&self) -> DateTime<Utc> {
        sqlx::query_scalar("SELECT clock_timestamp()")
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn runs(&self) -> Vec<RunView> {
        let rows: Vec<RunRow> = sqlx::query_as(
            "SELECT id, verb, scheduled_at, claimed_at, started_at, finished_at, outcome, error, runner, skipped, \
             manual, backfill, attempts FROM cron_job_runs ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        rows.into_iter()
            .map(|row| RunView {
                run_id: row.id,
                verb: row.verb,
                scheduled_at: row.scheduled_at,
                claimed_at: row.claimed_at,
                started_at: row.started_at,
                finished_at: row.finished_at,
                outcome: outcome(&row.outcome),
                error: row.error,
                runner: row.runner,
                skipped: u32::try_from(row.skipped).unwrap(),
                manual: row.manual,
                backfill: row.backfill,
                attempts: row.attempts.map(|a| a.0).unwrap_or_default(),
            })
            .collect()
    }

    async fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        sqlx::query_scalar(
            "SELECT j.next_execution FROM cron_jobs j \
             JOIN cron_deployments d ON d.id = j.deployment_id \
             WHERE d.module = $1 AND d.active AND j.verb = $2 AND j.state = 'idle'",
        )
        .bind(module)
        .bind(verb)
        .fetch_optional(&self.pool)
        .await
        .unwrap()
        .flatten()
    }

    type Operator = cron_runtime::admin::Admin;

    fn operator(&self) -> cron_runtime::admin::Admin {
        PgStore::from_pool(self.pool.clone()).admin()
    }
}

impl conformance::RowsUnderTest for Postgres {
    async fn edit_row(&self, verb: &str, expression: &str, next_execution: DateTime<Utc>) {
        sqlx::query(
            "UPDATE cron_jobs j SET schedule = $3, next_execution = $4 \
             FROM cron_deployments d \
             WHERE d.id = j.deployment_id AND d.active AND d.module = $1 AND j.verb = $2",
        )
        .bind(conformance::MODULE)
        .bind(verb)
        .bind(expression)
        .bind(next_execution)
        .execute(&self.pool)
        .await
        .unwrap();
    }

    async fn delete_run(&self, run_id: i64) {
        sqlx::query("DELETE FROM cron_job_runs WHERE id = $1")
            .bind(run_id)
            .execute(&self.pool)
            .await
            .unwrap();
    }
}

macro_rules! postgres_case {
    ($case:ident) => {
        #[sqlx::test(migrations = "./migrations")]
        async fn $case(pool: PgPool) {
            conformance::$case(Postgres { pool }).await;
        }
    };
}

conformance::every_case!(postgres_case);
conformance::every_row_case!(postgres_case);
