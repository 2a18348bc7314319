//! `pause`, `resume` and `trigger`: stopping and restarting a verb's regular runs, and asking for one
//! run now, on every store, and what they report. A pause is the `paused` column the claim honours; a
//! trigger is taken by the replicas' own claim. Each is one write transaction of the store
//! ([`Backend::write`]), through the statements of [`PauseTx`].

use std::future::Future;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;
use serde::Serialize;

use super::AdminError;
use super::lookup::{Lookup, resolve_verb};
use super::tables::{Write, db};
use crate::rfc3339;

/// The result of [`Admin::pause`](super::Admin::pause) and [`Admin::resume`](super::Admin::resume).
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

/// The result of [`Admin::trigger`](super::Admin::trigger).
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

/// The statements of `pause`, `resume` and `trigger` on a write transaction. The rows of a verb are
/// those of `module_name` `module` and `verb` `verb`, one per deployment of its module that has it.
pub(crate) trait PauseTx: Write {
    /// Whether each row of the verb is paused, locking the rows where the database locks rows.
    fn lock_paused(
        &mut self,
        module: &str,
        verb: &str,
    ) -> impl Future<Output = Result<Vec<bool>, sqlx::Error>> + Send;

    /// Pauses the rows of the verb with `note` at the transaction's instant: a row already paused keeps
    /// its instant, and its note unless `note` is given.
    fn set_paused(
        &mut self,
        module: &str,
        verb: &str,
        note: Option<&str>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The rows of the verb, as `resume` reads them, locking them where the database locks rows.
    fn lock_for_resume(
        &mut self,
        module: &str,
        verb: &str,
    ) -> impl Future<Output = Result<Vec<ResumeRow>, sqlx::Error>> + Send;

    /// The store's clock at the transaction's instant.
    fn now(&mut self) -> impl Future<Output = Result<DateTime<Utc>, sqlx::Error>> + Send;

    /// Resumes row `id` (clearing its pause and note), whose next occurrence is `next`.
    fn set_resumed(
        &mut self,
        id: i64,
        next: Option<DateTime<Utc>>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The pause of the verb's rows: the active deployment's row first, then the newest.
    fn pause_rows(
        &mut self,
        module: &str,
        verb: &str,
    ) -> impl Future<Output = Result<Vec<PauseRow>, sqlx::Error>> + Send;

    /// Module `module`'s active deployment, with its live replicas.
    fn active_deployment(
        &mut self,
        module: &str,
    ) -> impl Future<Output = Result<Option<ActiveDeployment>, sqlx::Error>> + Send;

    /// The row of verb `verb` in deployment `deployment_id`, locking it where the database locks rows.
    fn lock_trigger_row(
        &mut self,
        deployment_id: i64,
        verb: &str,
    ) -> impl Future<Output = Result<Option<TriggerRow>, sqlx::Error>> + Send;

    /// A run of the verb that refuses a trigger: the run of an executing row, unless it is a regular
    /// run claimed ahead that has not started at the transaction's instant.
    fn executing(
        &mut self,
        module: &str,
        verb: &str,
    ) -> impl Future<Output = Result<Option<ExecutingRow>, sqlx::Error>> + Send;

    /// Marks row `id` triggered at the transaction's instant, and returns that instant.
    fn request_trigger(
        &mut self,
        id: i64,
    ) -> impl Future<Output = Result<DateTime<Utc>, sqlx::Error>> + Send;
}

/// A row of a verb, as `pause` and `resume` report its state: the active deployment's row, else the
/// newest.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct PauseRow {
    pub(crate) paused: bool,
    pub(crate) pause_note: Option<String>,
    pub(crate) paused_at: Option<DateTime<Utc>>,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) active: bool,
}

/// A row of a verb, as `resume` reads it.
#[derive(Debug)]
pub(crate) struct ResumeRow {
    pub(crate) id: i64,
    /// The schedule its text describes, or why it does not parse.
    pub(crate) schedule: Result<ZonedSchedule, String>,
    /// Its state is `idle`.
    pub(crate) idle: bool,
    /// It holds a pending retry (`retry_run_id`).
    pub(crate) retry_pending: bool,
    pub(crate) paused: bool,
    pub(crate) next_execution: Option<DateTime<Utc>>,
}

/// A module's active deployment, as `trigger` reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ActiveDeployment {
    pub(crate) id: i64,
    pub(crate) key: String,
    /// Its replicas whose last heartbeat is within the store's liveness window.
    pub(crate) live_replicas: i64,
}

/// The row `trigger` marks.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct TriggerRow {
    pub(crate) id: i64,
    pub(crate) trigger_requested_at: Option<DateTime<Utc>>,
}

/// The run that refuses a trigger.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ExecutingRow {
    pub(crate) current_run_id: i64,
    pub(crate) started_at: Option<DateTime<Utc>>,
}

/// [`Admin::pause`](super::Admin::pause).
pub(crate) async fn pause<B>(
    backend: &B,
    verb: &str,
    module: Option<&str>,
    note: Option<&str>,
) -> Result<Pause, AdminError>
where
    B: Lookup,
    B::Write: PauseTx,
{
    let (module, verb) = resolve_verb(backend, verb, module).await?;
    let context = format!("pausing `{verb}`");
    let mut tx = backend.write(&context).await?;
    let was_paused = tx.lock_paused(&module, &verb).await.map_err(db(&context))?;
    tx.set_paused(&module, &verb, note)
        .await
        .map_err(db(&context))?;
    tx.notify(&module).await.map_err(db(&context))?;
    let rows = tx.pause_rows(&module, &verb).await.map_err(db(&context))?;
    tx.commit().await.map_err(db(&context))?;
    Ok(pause_state(
        &module,
        &verb,
        was_paused.iter().any(|p| !p),
        &rows,
    ))
}

/// [`Admin::resume`](super::Admin::resume).
pub(crate) async fn resume<B>(
    backend: &B,
    verb: &str,
    module: Option<&str>,
) -> Result<Pause, AdminError>
where
    B: Lookup,
    B::Write: PauseTx,
{
    let (module, verb) = resolve_verb(backend, verb, module).await?;
    let context = format!("resuming `{verb}`");
    let mut tx = backend.write(&context).await?;
    let rows = tx
        .lock_for_resume(&module, &verb)
        .await
        .map_err(db(&context))?;
    let now = tx.now().await.map_err(db(&context))?;
    let mut changed = false;
    for row in rows {
        if !row.paused {
            continue;
        }
        changed = true;
        // A row holding a pending retry keeps its instant: the claim takes the retry or, when the
        // next occurrence has come, ends it (docs/runtime.md, "Retries").
        let next = resumed_next(
            row.schedule,
            row.idle && !row.retry_pending,
            row.next_execution,
            now,
        );
        tx.set_resumed(row.id, next).await.map_err(db(&context))?;
    }
    tx.notify(&module).await.map_err(db(&context))?;
    let rows = tx.pause_rows(&module, &verb).await.map_err(db(&context))?;
    tx.commit().await.map_err(db(&context))?;
    Ok(pause_state(&module, &verb, changed, &rows))
}

/// [`Admin::trigger`](super::Admin::trigger).
pub(crate) async fn trigger<B>(
    backend: &B,
    verb: &str,
    module: Option<&str>,
) -> Result<Triggered, AdminError>
where
    B: Lookup,
    B::Write: PauseTx,
{
    let (module, verb) = resolve_verb(backend, verb, module).await?;
    let context = format!("triggering `{verb}`");
    let mut tx = backend.write(&context).await?;
    let Some(active) = tx.active_deployment(&module).await.map_err(db(&context))? else {
        return Err(AdminError::NoActiveDeployment { module });
    };
    let Some(row) = tx
        .lock_trigger_row(active.id, &verb)
        .await
        .map_err(db(&context))?
    else {
        return Err(AdminError::NotInActiveDeployment {
            module,
            verb,
            deployment: active.key,
        });
    };
    // A regular run claimed ahead of its instant has not started: it does not refuse the trigger,
    // which is taken when that run ends (a job due every second is claimed that way nearly always).
    if let Some(executing) = tx.executing(&module, &verb).await.map_err(db(&context))? {
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
            let at = tx.request_trigger(row.id).await.map_err(db(&context))?;
            tx.notify(&module).await.map_err(db(&context))?;
            at
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

/// The pause of verb `verb` of `module` as its `rows` say after a change (the active deployment's row
/// first, then the newest); `changed` says whether the call changed it.
fn pause_state(module: &str, verb: &str, changed: bool, rows: &[PauseRow]) -> Pause {
    let first = rows.first();
    Pause {
        module: module.to_owned(),
        verb: verb.to_owned(),
        paused: first.is_some_and(|r| r.paused),
        changed,
        note: first.and_then(|r| r.pause_note.clone()),
        paused_at: first.and_then(|r| r.paused_at),
        deployments: rows.len() as u64,
        next_execution: first.filter(|r| r.active).and_then(|r| r.next_execution),
    }
}

/// The next occurrence of a paused row that `resume` resumes at `now`: the first after now of an idle
/// row whose schedule parses (a row whose next occurrence is still ahead keeps it). An executing row is
/// rescheduled by its run's end, and a row that does not parse keeps its `next_execution` (G8,
/// docs/operations.md).
fn resumed_next(
    schedule: Result<ZonedSchedule, String>,
    idle: bool,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    match schedule {
        Ok(schedule) if idle => match next_execution {
            Some(next) if next > now => Some(next),
            _ => schedule.next_after(now),
        },
        _ => next_execution,
    }
}
