//! `pause`, `resume` and `trigger`: stopping and restarting a verb's regular runs, and asking for one
//! run now. A pause is the `paused` column the claim honours; a trigger is taken by the replicas' own
//! claim. Each is one write transaction, whose commit the replicas' stores see (see the module above).

use sqlx::SqliteConnection;

use super::{SqliteAdmin, live_replicas};
use crate::admin::pause::{PauseRow, pause_state, resumed_next};
use crate::admin::{AdminError, Pause, Triggered};
use crate::store::rules::row_schedule;
use crate::store::sqlite::{db, instant, micros};

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

/// The rows of verb `?2` of module `?1`, as [`ResumeRow`]s.
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

/// The row of verb `?2` in deployment `?1`, as a [`TriggerRow`].
const SELECT_TRIGGER_ROW: &str = "\
    SELECT id, trigger_requested_at FROM cron_jobs WHERE deployment_id = ?1 AND verb = ?2";

/// A run of verb `?2` of module `?1` that refuses a trigger at the instant `?3`, as an
/// [`ExecutingRow`]: the run of an executing row, unless it is a regular run claimed ahead that has not
/// started.
const SELECT_EXECUTING: &str = "\
    SELECT j.current_run_id, r.started_at FROM cron_jobs j \
    LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
    WHERE j.module_name = ?1 AND j.verb = ?2 AND j.state = 'executing' \
      AND (r.id IS NULL OR r.manual = 1 OR r.started_at IS NULL OR r.started_at <= ?3) \
    LIMIT 1";

/// Marks row `?1` triggered at the instant `?2`.
const REQUEST_TRIGGER: &str = "UPDATE cron_jobs SET trigger_requested_at = ?2 WHERE id = ?1";

/// A row of [`SELECT_FOR_RESUME`].
#[derive(Debug, sqlx::FromRow)]
struct ResumeRow {
    id: i64,
    schedule: String,
    timezone: String,
    state: String,
    paused: bool,
    next_execution: Option<i64>,
    /// A pending retry (docs/runtime.md, "Retries") keeps the row at its instant: the claim ends it
    /// cut short if the next occurrence has come meanwhile.
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

/// A row of [`SELECT_ACTIVE_DEPLOYMENT`].
#[derive(Debug, sqlx::FromRow)]
struct ActiveDeployment {
    id: i64,
    key: String,
    live_replicas: i64,
}

/// A row of [`SELECT_TRIGGER_ROW`].
#[derive(Debug, sqlx::FromRow)]
struct TriggerRow {
    id: i64,
    trigger_requested_at: Option<i64>,
}

/// A row of [`SELECT_EXECUTING`].
#[derive(Debug, sqlx::FromRow)]
struct ExecutingRow {
    current_run_id: i64,
    started_at: Option<i64>,
}

impl SqliteAdmin {
    /// [`Admin::pause`](crate::admin::Admin::pause) on SQLite.
    pub(crate) async fn pause(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = format!("pausing `{verb}`");
        let (mut tx, now) = self.write(&context).await?;
        let was_paused: Vec<bool> = sqlx::query_scalar(SELECT_PAUSED)
            .bind(&module)
            .bind(&verb)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(&context))?;
        sqlx::query(PAUSE)
            .bind(&module)
            .bind(&verb)
            .bind(note)
            .bind(micros(now))
            .execute(&mut *tx)
            .await
            .map_err(db(&context))?;
        let pause = read_pause(&mut tx, &module, &verb, was_paused.iter().any(|p| !p))
            .await
            .map_err(db(&context))?;
        tx.commit().await.map_err(db(&context))?;
        Ok(pause)
    }

    /// [`Admin::resume`](crate::admin::Admin::resume) on SQLite.
    pub(crate) async fn resume(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = format!("resuming `{verb}`");
        let (mut tx, now) = self.write(&context).await?;
        let rows: Vec<ResumeRow> = sqlx::query_as(SELECT_FOR_RESUME)
            .bind(&module)
            .bind(&verb)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(&context))?;
        let mut changed = false;
        for row in rows {
            if !row.paused {
                continue;
            }
            changed = true;
            let next = resumed_next(
                row_schedule(&row.schedule, &row.timezone),
                row.state == "idle" && row.retry_run_id.is_none(),
                row.next_execution.map(instant),
                now,
            );
            sqlx::query(RESUME)
                .bind(row.id)
                .bind(next.map(micros))
                .execute(&mut *tx)
                .await
                .map_err(db(&context))?;
        }
        let pause = read_pause(&mut tx, &module, &verb, changed)
            .await
            .map_err(db(&context))?;
        tx.commit().await.map_err(db(&context))?;
        Ok(pause)
    }

    /// [`Admin::trigger`](crate::admin::Admin::trigger) on SQLite.
    pub(crate) async fn trigger(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<Triggered, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = format!("triggering `{verb}`");
        let (mut tx, now) = self.write(&context).await?;
        let active: Option<ActiveDeployment> = sqlx::query_as(SELECT_ACTIVE_DEPLOYMENT)
            .bind(&module)
            .bind(self.alive_since(now))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(&context))?;
        let Some(active) = active else {
            return Err(AdminError::NoActiveDeployment { module });
        };
        let row: Option<TriggerRow> = sqlx::query_as(SELECT_TRIGGER_ROW)
            .bind(active.id)
            .bind(&verb)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(&context))?;
        let Some(row) = row else {
            return Err(AdminError::NotInActiveDeployment {
                module,
                verb,
                deployment: active.key,
            });
        };
        // A regular run claimed ahead of its instant has not started: it does not refuse the trigger,
        // which is taken when that run ends.
        let executing: Option<ExecutingRow> = sqlx::query_as(SELECT_EXECUTING)
            .bind(&module)
            .bind(&verb)
            .bind(micros(now))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(&context))?;
        if let Some(executing) = executing {
            return Err(AdminError::Executing {
                verb,
                run_id: executing.current_run_id,
                started_at: executing.started_at.map(instant),
            });
        }
        let pending = row.trigger_requested_at.map(instant);
        let requested_at = match pending {
            Some(at) => at,
            None => {
                sqlx::query(REQUEST_TRIGGER)
                    .bind(row.id)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await
                    .map_err(db(&context))?;
                now
            }
        };
        tx.commit().await.map_err(db(&context))?;
        Ok(Triggered {
            module,
            verb,
            deployment: active.key,
            requested_at,
            already_pending: pending.is_some(),
            live_replicas: active.live_replicas,
        })
    }
}

/// The verb's pause as its rows say after a change: the active deployment's row, else the newest.
async fn read_pause(
    tx: &mut SqliteConnection,
    module: &str,
    verb: &str,
    changed: bool,
) -> Result<Pause, sqlx::Error> {
    let rows: Vec<SqlitePauseRow> = sqlx::query_as(SELECT_PAUSE)
        .bind(module)
        .bind(verb)
        .fetch_all(&mut *tx)
        .await?;
    let rows: Vec<PauseRow> = rows
        .into_iter()
        .map(|row| PauseRow {
            paused: row.paused,
            pause_note: row.pause_note,
            paused_at: row.paused_at.map(instant),
            next_execution: row.next_execution.map(instant),
            active: row.active,
        })
        .collect();
    Ok(pause_state(module, verb, changed, &rows))
}
