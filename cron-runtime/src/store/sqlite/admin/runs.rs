//! The statements of `runs` on SQLite, which `crate::admin::runs` runs: the history of runs, latest
//! first, filtered by module, verb and age.

use super::SqliteAdmin;
use crate::admin::runs::History;
use crate::admin::{Run, RunFilter, Since};
use crate::store::sqlite::end::read_attempts;
use crate::store::sqlite::{instant, micros, micros_of, now};

/// Whether verb `?1` has any run (of module `?2` unless it is null).
const HAS_HISTORY: &str = "\
    SELECT EXISTS (SELECT 1 FROM cron_job_runs \
    WHERE verb = ?1 AND (?2 IS NULL OR module_name = ?2))";

/// The latest `?4` runs, as [`RunRow`]s: of module `?1` and verb `?2` (any when null), scheduled at or
/// after the instant `?3` (no bound when null), and before the run `(?5 scheduled_at, ?6 id)` in the
/// history's order (from the newest when null). The cursor is always a row comparison, so that the
/// index (`cron_job_runs_verb` or `cron_job_runs_scheduled`) is read from it. A run that is `running`
/// after an attempt ended (it has attempts) looks up the job row holding its pending retry (idle,
/// `retry_run_id` its id; after a takeover, another deployment's row than `job_id`): that subquery runs
/// for those runs only.
const SELECT_RUNS: &str = "\
    SELECT r.id, r.module_name AS module, r.verb, d.key AS deployment, r.scheduled_at, r.claimed_at, \
           r.started_at, r.finished_at, r.outcome, r.error, r.runner, r.late, r.skipped, r.manual, \
           r.attempts, \
           CASE WHEN r.outcome = 'running' AND r.attempts IS NOT NULL THEN \
               (SELECT j.next_execution FROM cron_jobs j \
                WHERE j.retry_run_id = r.id AND j.state = 'idle' LIMIT 1) \
           END AS retry_at \
    FROM cron_job_runs r \
    LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
    WHERE (?1 IS NULL OR r.module_name = ?1) \
      AND (?2 IS NULL OR r.verb = ?2) \
      AND (?3 IS NULL OR r.scheduled_at >= ?3) \
      AND (r.scheduled_at, r.id) < (coalesce(?5, 9223372036854775807), coalesce(?6, 9223372036854775807)) \
    ORDER BY r.scheduled_at DESC, r.id DESC \
    LIMIT ?4";

/// A row of [`SELECT_RUNS`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    id: i64,
    module: String,
    verb: String,
    deployment: Option<String>,
    scheduled_at: i64,
    claimed_at: Option<i64>,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    outcome: String,
    error: Option<String>,
    runner: String,
    late: bool,
    skipped: i32,
    manual: bool,
    /// `cron_job_runs.attempts`: JSON text, or NULL.
    attempts: Option<String>,
    retry_at: Option<i64>,
}

impl From<RunRow> for Run {
    fn from(row: RunRow) -> Run {
        Run {
            id: row.id,
            module: row.module,
            verb: row.verb,
            deployment: row.deployment,
            scheduled_at: instant(row.scheduled_at),
            claimed_at: row.claimed_at.map(instant),
            started_at: row.started_at.map(instant),
            lateness_ms: None,
            finished_at: row.finished_at.map(instant),
            outcome: row.outcome,
            error: row.error,
            runner: row.runner,
            late: row.late,
            skipped: row.skipped,
            manual: row.manual,
            attempts: read_attempts(row.id, row.attempts.as_deref()),
            retry_at: row.retry_at.map(instant),
        }
    }
}

impl History for SqliteAdmin {
    async fn has_history(&self, verb: &str, module: Option<&str>) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(HAS_HISTORY)
            .bind(verb)
            .bind(module)
            .fetch_one(&self.pool)
            .await
    }

    async fn latest_runs(
        &self,
        filter: &RunFilter,
        verb: Option<&str>,
    ) -> Result<Vec<Run>, sqlx::Error> {
        let since = filter.since.map(|since| match since {
            Since::Instant(at) => micros(at),
            Since::Ago(ago) => micros(now()) - micros_of(ago),
        });
        let rows: Vec<RunRow> = sqlx::query_as(SELECT_RUNS)
            .bind(filter.module.as_deref())
            .bind(verb)
            .bind(since)
            .bind(i64::from(filter.limit))
            .bind(filter.before.map(|c| micros(c.scheduled_at)))
            .bind(filter.before.map(|c| c.id))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Run::from).collect())
    }
}
