//! `pause`, `resume` and `trigger`: stopping and restarting a verb's regular runs, and asking for one
//! run now. A pause is the `paused` column the claim honours; a trigger is taken by the replicas' own
//! claim.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Admin, AdminError, rfc3339};
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

/// The result of [`Admin::pause`] and [`Admin::resume`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// Whether the verb is paused now.
    pub paused: bool,
    /// Whether the call changed the verb's state (false: it was already paused, or not paused).
    pub changed: bool,
    /// The note given with the pause.
    pub note: Option<String>,
    /// When the verb was paused.
    #[serde(with = "rfc3339::option")]
    pub paused_at: Option<DateTime<Utc>>,
    /// The rows of the verb: one per deployment of the module that has it.
    pub deployments: u64,
    /// The next occurrence of the active deployment's row.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
}

/// The result of [`Admin::trigger`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Triggered {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The key of the module's active deployment, whose row is triggered.
    pub deployment: String,
    /// The instant of the trigger: the manual run is recorded as scheduled at it.
    #[serde(with = "rfc3339")]
    pub requested_at: DateTime<Utc>,
    /// A trigger was already pending; this call changed nothing.
    pub already_pending: bool,
    /// The live replicas of the deployment: with none, the run waits for one.
    pub live_replicas: i64,
}

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

/// A row of [`SELECT_PAUSE`].
#[derive(Debug, sqlx::FromRow)]
struct PauseRow {
    paused: bool,
    pause_note: Option<String>,
    paused_at: Option<DateTime<Utc>>,
    next_execution: Option<DateTime<Utc>>,
    active: bool,
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

impl Admin {
    /// Pauses `verb`: its regular occurrences are not claimed until it is resumed (a run in flight
    /// finishes). The pause is set on the verb's row in every deployment of its module, and a takeover
    /// carries it, so it stays across deploys and rollbacks. Pausing a paused verb changes only its note
    /// (when one is given).
    pub async fn pause(
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
        let pause = pause_state(&mut tx, &module, &verb, was_paused.iter().any(|p| !p))
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// Resumes `verb` in every deployment of its module. It continues from its first occurrence after
    /// now: the occurrences that came while it was paused are not run (and an idle row whose next
    /// occurrence is still ahead keeps it).
    pub async fn resume(&self, verb: &str, module: Option<&str>) -> Result<Pause, AdminError> {
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
            // An executing row is rescheduled by its run's end; a row that does not parse keeps its
            // `next_execution` (G8, docs/operations.md).
            let next = match self.schedules.parse(&row.schedule, &row.timezone) {
                Ok(schedule) if row.state == "idle" => match row.next_execution {
                    Some(next) if next > row.now => Some(next),
                    _ => schedule.next_after(row.now),
                },
                _ => row.next_execution,
            };
            sqlx::query(RESUME)
                .bind(row.id)
                .bind(next)
                .execute(&mut *tx)
                .await
                .map_err(db(context()))?;
        }
        notify(&mut tx, &module).await.map_err(db(context()))?;
        let pause = pause_state(&mut tx, &module, &verb, changed)
            .await
            .map_err(db(context()))?;
        tx.commit().await.map_err(db(context()))?;
        Ok(pause)
    }

    /// Asks for one run of `verb` now, through the replicas' claim: the active deployment's row is
    /// marked, replicas are notified, and the next claim records a run scheduled at the trigger's
    /// instant with `manual = true` (a paused verb runs too). Overlap is respected: a verb executing
    /// under any deployment of its module is refused, unless its run is a regular one claimed ahead that
    /// has not started (the trigger is then taken when that run ends). The regular schedule is
    /// unchanged; see docs/operations.md for the details.
    pub async fn trigger(&self, verb: &str, module: Option<&str>) -> Result<Triggered, AdminError> {
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
async fn pause_state(
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
    let first = rows.first();
    Ok(Pause {
        module: module.to_owned(),
        verb: verb.to_owned(),
        paused: first.is_some_and(|r| r.paused),
        changed,
        note: first.and_then(|r| r.pause_note.clone()),
        paused_at: first.and_then(|r| r.paused_at),
        deployments: rows.len() as u64,
        next_execution: first.filter(|r| r.active).and_then(|r| r.next_execution),
    })
}
