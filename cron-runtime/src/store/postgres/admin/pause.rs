//! The statements of `pause`, `resume` and `trigger` on PostgreSQL, which `crate::admin::pause` runs:
//! each locks the rows it decides on (`FOR UPDATE`), and reads instants from the transaction's `now()`.

use chrono::{DateTime, Utc};

use super::{NOW, PgWrite};
use crate::admin::pause::{
    ActiveDeployment, ExecutingRow, PauseRow, PauseTx, ResumeRow, TriggerRow,
};

/// Locks the rows of verb `$2` of module `$1` (one per deployment that has it) and reads whether each is
/// paused.
pub(super) const LOCK_PAUSED: &str = "\
    SELECT paused FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE";

/// Pauses the rows of verb `$2` of module `$1` with the note `$3`: a row already paused keeps its
/// instant, and its note unless `$3` is given.
pub(super) const PAUSE: &str = "\
    UPDATE cron_jobs \
    SET paused = true, \
        pause_note = CASE WHEN paused THEN coalesce($3, pause_note) ELSE $3 END, \
        paused_at = CASE WHEN paused THEN paused_at ELSE now() END \
    WHERE module_name = $1 AND verb = $2";

/// Locks the rows of verb `$2` of module `$1`, as [`ResumeText`]s.
pub(super) const LOCK_FOR_RESUME: &str = "\
    SELECT id, schedule, timezone, state, paused, next_execution, retry_run_id \
    FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE";

/// Resumes row `$1`, whose next occurrence is `$2`.
pub(super) const RESUME: &str = "\
    UPDATE cron_jobs \
    SET paused = false, pause_note = NULL, paused_at = NULL, next_execution = $2 \
    WHERE id = $1";

/// The pause of verb `$2` of module `$1`, as [`PauseRow`]s: the active deployment's row first, then the
/// newest.
pub(super) const SELECT_PAUSE: &str = "\
    SELECT j.paused, j.pause_note, j.paused_at, j.next_execution, d.active \
    FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
    WHERE j.module_name = $1 AND j.verb = $2 \
    ORDER BY d.active DESC, d.created_at DESC, d.id DESC";

/// Module `$1`'s active deployment, as an [`ActiveDeployment`] whose live replicas are those seen within
/// `$2` seconds.
pub(super) const SELECT_ACTIVE_DEPLOYMENT: &str = concat!(
    "SELECT id, key, ",
    live_replicas!(),
    " AS live_replicas FROM cron_deployments d WHERE module = $1 AND active"
);

/// Locks the row of verb `$2` in deployment `$1`, as a [`TriggerRow`].
pub(super) const LOCK_TRIGGER_ROW: &str = "\
    SELECT id, trigger_requested_at FROM cron_jobs \
    WHERE deployment_id = $1 AND verb = $2 FOR UPDATE";

/// A run of verb `$2` of module `$1` that refuses a trigger, as an [`ExecutingRow`]: the run of an
/// executing row, unless it is a regular run claimed ahead that has not started.
pub(super) const SELECT_EXECUTING: &str = "\
    SELECT j.current_run_id, r.started_at FROM cron_jobs j \
    LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
    WHERE j.module_name = $1 AND j.verb = $2 AND j.state = 'executing' \
      AND (r.id IS NULL OR r.manual OR r.started_at IS NULL OR r.started_at <= now()) \
    LIMIT 1";

/// Marks row `$1` triggered now; returns that instant.
pub(super) const REQUEST_TRIGGER: &str = "\
    UPDATE cron_jobs SET trigger_requested_at = now() WHERE id = $1 \
    RETURNING trigger_requested_at";

/// A row of [`LOCK_FOR_RESUME`], its schedule as text.
#[derive(Debug, sqlx::FromRow)]
struct ResumeText {
    id: i64,
    schedule: String,
    timezone: String,
    state: String,
    paused: bool,
    next_execution: Option<DateTime<Utc>>,
    retry_run_id: Option<i64>,
}

impl PauseTx for PgWrite {
    async fn lock_paused(&mut self, module: &str, verb: &str) -> Result<Vec<bool>, sqlx::Error> {
        sqlx::query_scalar(LOCK_PAUSED)
            .bind(module)
            .bind(verb)
            .fetch_all(&mut *self.tx)
            .await
    }

    async fn set_paused(
        &mut self,
        module: &str,
        verb: &str,
        note: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(PAUSE)
            .bind(module)
            .bind(verb)
            .bind(note)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn lock_for_resume(
        &mut self,
        module: &str,
        verb: &str,
    ) -> Result<Vec<ResumeRow>, sqlx::Error> {
        let rows: Vec<ResumeText> = sqlx::query_as(LOCK_FOR_RESUME)
            .bind(module)
            .bind(verb)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| ResumeRow {
                id: row.id,
                schedule: self.schedules.parse(&row.schedule, &row.timezone),
                idle: row.state == "idle",
                retry_pending: row.retry_run_id.is_some(),
                paused: row.paused,
                next_execution: row.next_execution,
            })
            .collect())
    }

    async fn now(&mut self) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query_scalar(NOW).fetch_one(&mut *self.tx).await
    }

    async fn set_resumed(
        &mut self,
        id: i64,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(RESUME)
            .bind(id)
            .bind(next)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn pause_rows(&mut self, module: &str, verb: &str) -> Result<Vec<PauseRow>, sqlx::Error> {
        sqlx::query_as(SELECT_PAUSE)
            .bind(module)
            .bind(verb)
            .fetch_all(&mut *self.tx)
            .await
    }

    async fn active_deployment(
        &mut self,
        module: &str,
    ) -> Result<Option<ActiveDeployment>, sqlx::Error> {
        sqlx::query_as(SELECT_ACTIVE_DEPLOYMENT)
            .bind(module)
            .bind(self.liveness_secs)
            .fetch_optional(&mut *self.tx)
            .await
    }

    async fn lock_trigger_row(
        &mut self,
        deployment_id: i64,
        verb: &str,
    ) -> Result<Option<TriggerRow>, sqlx::Error> {
        sqlx::query_as(LOCK_TRIGGER_ROW)
            .bind(deployment_id)
            .bind(verb)
            .fetch_optional(&mut *self.tx)
            .await
    }

    async fn executing(
        &mut self,
        module: &str,
        verb: &str,
    ) -> Result<Option<ExecutingRow>, sqlx::Error> {
        sqlx::query_as(SELECT_EXECUTING)
            .bind(module)
            .bind(verb)
            .fetch_optional(&mut *self.tx)
            .await
    }

    async fn request_trigger(&mut self, id: i64) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query_scalar(REQUEST_TRIGGER)
            .bind(id)
            .fetch_one(&mut *self.tx)
            .await
    }
}
