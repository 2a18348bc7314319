//! The statements of `pause`, `resume` and `trigger` on SQLite, which `crate::admin::pause` runs: the
//! write transaction holds the file, and its instant is the store's clock read then.

use chrono::{DateTime, Utc};

use super::{SqliteWrite, live_replicas};
use crate::admin::pause::{
    ActiveDeployment, ExecutingRow, PauseRow, PauseTx, ResumeRow, TriggerRow,
};
use crate::store::rules::row_schedule;
use crate::store::sqlite::{instant, micros};

/// Whether each row of verb `?2` of module `?1` (one per deployment that has it) is paused.
const SELECT_PAUSED: &str =
    "SELECT paused FROM cron_jobs WHERE module_name = ?1 AND verb = ?2 ORDER BY id";

/// Pauses the rows of verb `?2` of module `?1` with the note `?3` at the instant `?4`: a row already
/// paused keeps its instant, and its note unless `?3` is given.
const PAUSE: &str = "\
    UPDATE cron_jobs \
    SET paused = 1, \
        pause_note = CASE WHEN paused = 1 THEN coalesce(?3, pause_note) ELSE ?3 END, \
        paused_at = CASE WHEN paused = 1 THEN paused_at ELSE ?4 END \
    WHERE module_name = ?1 AND verb = ?2";

/// The rows of verb `?2` of module `?1`, as [`ResumeText`]s.
const SELECT_FOR_RESUME: &str = "\
    SELECT id, schedule, timezone, state, paused, next_execution, retry_run_id \
    FROM cron_jobs WHERE module_name = ?1 AND verb = ?2 ORDER BY id";

/// Resumes row `?1`, whose next occurrence is `?2`.
const RESUME: &str = "\
    UPDATE cron_jobs \
    SET paused = 0, pause_note = NULL, paused_at = NULL, next_execution = ?2 \
    WHERE id = ?1";

/// The pause of verb `?2` of module `?1`, as [`SqlitePauseRow`]s: the active deployment's row first,
/// then the newest.
const SELECT_PAUSE: &str = "\
    SELECT j.paused, j.pause_note, j.paused_at, j.next_execution, d.active \
    FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
    WHERE j.module_name = ?1 AND j.verb = ?2 \
    ORDER BY d.active DESC, d.created_at DESC, d.id DESC";

/// Module `?1`'s active deployment, as an [`ActiveDeployment`] whose live replicas are those seen since
/// the instant `?2`.
const SELECT_ACTIVE_DEPLOYMENT: &str = concat!(
    "SELECT id, key, ",
    live_replicas!(),
    " AS live_replicas FROM cron_deployments d WHERE module = ?1 AND active = 1"
);

/// The row of verb `?2` in deployment `?1`, as a [`SqliteTriggerRow`].
const SELECT_TRIGGER_ROW: &str = "\
    SELECT id, trigger_requested_at FROM cron_jobs WHERE deployment_id = ?1 AND verb = ?2";

/// A run of verb `?2` of module `?1` that refuses a trigger at the instant `?3`, as an
/// [`SqliteExecutingRow`]: the run of an executing row, unless it is a regular run claimed ahead that has not
/// started.
const SELECT_EXECUTING: &str = "\
    SELECT j.current_run_id, r.started_at FROM cron_jobs j \
    LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
    WHERE j.module_name = ?1 AND j.verb = ?2 AND j.state = 'executing' \
      AND (r.id IS NULL OR r.manual = 1 OR r.started_at IS NULL OR r.started_at <= ?3) \
    LIMIT 1";

/// Marks row `?1` triggered at the instant `?2`.
const REQUEST_TRIGGER: &str = "UPDATE cron_jobs SET trigger_requested_at = ?2 WHERE id = ?1";

/// A row of [`SELECT_FOR_RESUME`], its schedule as text and its instant as the tables store it.
#[derive(Debug, sqlx::FromRow)]
struct ResumeText {
    id: i64,
    schedule: String,
    timezone: String,
    state: String,
    paused: bool,
    next_execution: Option<i64>,
    retry_run_id: Option<i64>,
}

/// A row of [`SELECT_PAUSE`], its instants as the tables store them.
#[derive(Debug, sqlx::FromRow)]
struct SqlitePauseRow {
    paused: bool,
    pause_note: Option<String>,
    paused_at: Option<i64>,
    next_execution: Option<i64>,
    active: bool,
}

/// A row of [`SELECT_TRIGGER_ROW`], its instant as the tables store it.
#[derive(Debug, sqlx::FromRow)]
struct SqliteTriggerRow {
    id: i64,
    trigger_requested_at: Option<i64>,
}

/// A row of [`SELECT_EXECUTING`], its instant as the tables store it.
#[derive(Debug, sqlx::FromRow)]
struct SqliteExecutingRow {
    current_run_id: i64,
    started_at: Option<i64>,
}

impl PauseTx for SqliteWrite {
    async fn lock_paused(&mut self, module: &str, verb: &str) -> Result<Vec<bool>, sqlx::Error> {
        sqlx::query_scalar(SELECT_PAUSED)
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
            .bind(micros(self.now))
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn lock_for_resume(
        &mut self,
        module: &str,
        verb: &str,
    ) -> Result<Vec<ResumeRow>, sqlx::Error> {
        let rows: Vec<ResumeText> = sqlx::query_as(SELECT_FOR_RESUME)
            .bind(module)
            .bind(verb)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| ResumeRow {
                id: row.id,
                schedule: row_schedule(&row.schedule, &row.timezone),
                idle: row.state == "idle",
                retry_pending: row.retry_run_id.is_some(),
                paused: row.paused,
                next_execution: row.next_execution.map(instant),
            })
            .collect())
    }

    async fn now(&mut self) -> Result<DateTime<Utc>, sqlx::Error> {
        Ok(self.now)
    }

    async fn set_resumed(
        &mut self,
        id: i64,
        next: Option<DateTime<Utc>>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(RESUME)
            .bind(id)
            .bind(next.map(micros))
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn pause_rows(&mut self, module: &str, verb: &str) -> Result<Vec<PauseRow>, sqlx::Error> {
        let rows: Vec<SqlitePauseRow> = sqlx::query_as(SELECT_PAUSE)
            .bind(module)
            .bind(verb)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| PauseRow {
                paused: row.paused,
                pause_note: row.pause_note,
                paused_at: row.paused_at.map(instant),
                next_execution: row.next_execution.map(instant),
                active: row.active,
            })
            .collect())
    }

    async fn active_deployment(
        &mut self,
        module: &str,
    ) -> Result<Option<ActiveDeployment>, sqlx::Error> {
        sqlx::query_as(SELECT_ACTIVE_DEPLOYMENT)
            .bind(module)
            .bind(self.alive_since)
            .fetch_optional(&mut *self.tx)
            .await
    }

    async fn lock_trigger_row(
        &mut self,
        deployment_id: i64,
        verb: &str,
    ) -> Result<Option<TriggerRow>, sqlx::Error> {
        let row: Option<SqliteTriggerRow> = sqlx::query_as(SELECT_TRIGGER_ROW)
            .bind(deployment_id)
            .bind(verb)
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(row.map(|row| TriggerRow {
            id: row.id,
            trigger_requested_at: row.trigger_requested_at.map(instant),
        }))
    }

    async fn executing(
        &mut self,
        module: &str,
        verb: &str,
    ) -> Result<Option<ExecutingRow>, sqlx::Error> {
        let row: Option<SqliteExecutingRow> = sqlx::query_as(SELECT_EXECUTING)
            .bind(module)
            .bind(verb)
            .bind(micros(self.now))
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(row.map(|row| ExecutingRow {
            current_run_id: row.current_run_id,
            started_at: row.started_at.map(instant),
        }))
    }

    async fn request_trigger(&mut self, id: i64) -> Result<DateTime<Utc>, sqlx::Error> {
        sqlx::query(REQUEST_TRIGGER)
            .bind(id)
            .bind(micros(self.now))
            .execute(&mut *self.tx)
            .await?;
        Ok(self.now)
    }
}
