//! `pause`, `resume` and `trigger`: stopping and restarting a verb's regular runs, and asking for one
//! run now. A pause is the `paused` column the claim honours; a trigger is taken by the replicas' own
//! claim.

use chrono::{DateTime, Utc};

use super::{AdminError, PgAdmin};
use crate::admin::pause::{PauseRow, pause_state, resumed_next};
use crate::admin::{Pause, Triggered};
use crate::store::postgres::db;
use crate::store::postgres::notify::notify;

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

/// Locks the rows of verb `$2` of module `$1`, as [`ResumeRow`]s with the database's now.
pub(super) const LOCK_FOR_RESUME: &str = "\
    SELECT id, schedule, timezone, state, paused, next_execution, now() AS now \
    FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE";

/// Resumes row `$1`, whose next occurrence is `$2`; a row holding a pending retry keeps it, and the
/// claim takes the retry or, when the next occurrence has come, ends it (docs/runtime.md, "Retries").
pub(super) const RESUME: &str = "\
    UPDATE cron_jobs \
    SET paused = false, pause_note = NULL, paused_at = NULL, \
        next_execution = CASE WHEN retry_run_id IS NULL THEN $2 ELSE next_execution END \
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

/// A row of [`LOCK_FOR_RESUME`].
#[derive(Debug, sqlx::FromRow)]
struct ResumeRow {
    id: i64,
    schedule: String,
    timezone: String,
    state: String,
    paused: bool,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
}

/// A row of [`SELECT_ACTIVE_DEPLOYMENT`].
#[derive(Debug, sqlx::FromRow)]
struct ActiveDeployment {
    id: i64,
    key: String,
    live_replicas: i64,
}

/// A row of [`LOCK_TRIGGER_ROW`].
#[derive(Debug, sqlx::FromRow)]
struct TriggerRow {
    id: i64,
    trigger_requested_at: Option<DateTime<Utc>>,
}

/// A row of [`SELECT_EXECUTING`].
#[derive(Debug, sqlx::FromRow)]
struct ExecutingRow {
    current_run_id: i64,
    started_at: Option<DateTime<Utc>>,
}

impl PgAdmin {
    /// [`Admin::pause`](crate::admin::Admin::pause) on PostgreSQL.
    pub(crate) async fn pause(
        &self,
        verb: &str,
        module: Option<&str>,
        note: Option<&str>,
    ) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = || format!("pausing `{verb}`");
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let was_paused: Vec<bool> = sqlx::query_scalar(LOCK_PAUSED)
            .bind(&module)
            .bind(&verb)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        sqlx::query(PAUSE)
            .bind(&module)
            .bind(&verb)
            .bind(note)
            .execute(&mut *tx)
            .await
            .map_err(db(context()))?;
        notify(&mut tx, &module).await.map_err(db(context()))?;
        let pause = read_pause(&mut tx, &module, &verb, was_paused.iter().any(|p| !p))
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// [`Admin::resume`](crate::admin::Admin::resume) on PostgreSQL.
    pub(crate) async fn resume(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<Pause, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = || format!("resuming `{verb}`");
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let rows: Vec<ResumeRow> = sqlx::query_as(LOCK_FOR_RESUME)
            .bind(&module)
            .bind(&verb)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context()))?;
        let mut changed = false;
        for row in rows {
            if !row.paused {
                continue;
            }
            changed = true;
            let next = resumed_next(
                self.schedules.parse(&row.schedule, &row.timezone),
                row.state == "idle",
                row.next_execution,
                row.now,
            );
            sqlx::query(RESUME)
                .bind(row.id)
                .bind(next)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        notify(&mut tx, &module).await.map_err(db(context()))?;
        let pause = read_pause(&mut tx, &module, &verb, changed)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// [`Admin::trigger`](crate::admin::Admin::trigger) on PostgreSQL.
    pub(crate) async fn trigger(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<Triggered, AdminError> {
        let (module, verb) = self.resolve_verb(verb, module).await?;
        let context = {
            let verb = verb.clone();
            move || format!("triggering `{verb}`")
        };
        let mut tx = self.pool.begin().await.map_err(db(context()))?;
        let active: Option<ActiveDeployment> = sqlx::query_as(SELECT_ACTIVE_DEPLOYMENT)
            .bind(&module)
            .bind(self.liveness_secs)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context()))?;
        let Some(active) = active else {
            return Err(AdminError::NoActiveDeployment { module });
        };
        let row: Option<TriggerRow> = sqlx::query_as(LOCK_TRIGGER_ROW)
            .bind(active.id)
            .bind(&verb)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context()))?;
        let Some(row) = row else {
            return Err(AdminError::NotInActiveDeployment {
                module,
                verb,
                deployment: active.key,
            });
        };
        // A regular run claimed ahead of its instant has not started: it does not refuse the trigger,
        // which is taken when that run ends (a job due every second is claimed that way nearly always).
        let executing: Option<ExecutingRow> = sqlx::query_as(SELECT_EXECUTING)
            .bind(&module)
            .bind(&verb)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(context()))?;
        if let Some(executing) = executing {
            return Err(AdminError::Executing {
                verb,
                run_id: executing.current_run_id,
                started_at: executing.started_at,
            });
        }
        let pending = row.trigger_requested_at;
        let requested_at = match pending {
            Some(at) => at,
            None => {
                let at: DateTime<Utc> = sqlx::query_scalar(REQUEST_TRIGGER)
                    .bind(row.id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db(context()))?;
                notify(&mut tx, &module).await.map_err(db(context()))?;
                at
            }
        };
        tx.commit().await.map_err(db(context()))?;
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
    tx: &mut sqlx::PgConnection,
    module: &str,
    verb: &str,
    changed: bool,
) -> Result<Pause, sqlx::Error> {
    let rows: Vec<PauseRow> = sqlx::query_as(SELECT_PAUSE)
        .bind(module)
        .bind(verb)
        .fetch_all(&mut *tx)
        .await?;
    Ok(pause_state(module, verb, changed, &rows))
}
