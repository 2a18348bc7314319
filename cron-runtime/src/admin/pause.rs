//! `pause`, `resume` and `trigger`: stopping and restarting a verb's regular runs, and asking for one
//! run now, on every store, and what they report. A pause is the `paused` column the claim honours; a
//! trigger is taken by the replicas' own claim. Each is one write transaction of the store
//! ([`SqlAdmin::write`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::audit::{Action, Actor, Record, record};
use super::lookup::resolve_verb;
use super::rows::{At, ExecutingRow, PauseRow, ResumeRow, TriggerRow};
use super::runs::attempts;
use super::sql::{Dialect, SqlAdmin, Statement, Write, db};
use crate::rfc3339;
use crate::store::RETRIES_CUT_SHORT;
use crate::store::rules::operator::{Resume, reported_at_resume, resume as resumed};

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
    /// The next run of the active deployment's row: its next occurrence, or its pending retry's instant;
    /// never before the call for a row resumed (docs/operations.md, "Pause and resume"). `None` while
    /// a run of the row executes (its end decides), or when the module has no active row.
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

/// [`Admin::pause`](super::Admin::pause).
pub(crate) async fn pause<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
    note: Option<&str>,
) -> Result<Pause, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("pausing `{verb}`");
    let mut tx = admin.write(&context).await?;
    tx.lock_module(&module, &context).await?;
    let before = read_state(&mut tx, &module, &verb, &context).await?;
    let was_paused: Vec<(bool,)> = Statement::<D>::new(D::SQL.lock_paused)
        .bind(module.clone())
        .bind(verb.clone())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    Statement::<D>::new(D::SQL.pause)
        .bind(module.clone())
        .bind(verb.clone())
        .bind(note.map(str::to_owned))
        .bind(At(tx.now))
        .execute(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let changed = was_paused.iter().any(|(paused,)| !paused);
    let audit = Audit {
        actor,
        action: Action::Pause,
        before,
        note,
    };
    let state = changed_state(tx, &module, &verb, &context, audit).await?;
    Ok(pause_state(&module, &verb, changed, &state))
}

/// [`Admin::resume`](super::Admin::resume).
pub(crate) async fn resume<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
) -> Result<Pause, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("resuming `{verb}`");
    let mut tx = admin.write(&context).await?;
    tx.lock_module(&module, &context).await?;
    let before = read_state(&mut tx, &module, &verb, &context).await?;
    let rows: Vec<ResumeRow> = Statement::<D>::new(D::SQL.lock_for_resume)
        .bind(module.clone())
        .bind(verb.clone())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let mut changed = false;
    for row in rows.into_iter().filter(|row| row.paused) {
        changed = true;
        let schedule = admin.schedule(&row.schedule, &row.timezone);
        let resume = resumed(
            schedule.as_ref().ok(),
            row.every_replica,
            row.state == "idle",
            row.retry_run_id.and(row.retry_of).map(DateTime::from),
            row.next_execution.map(DateTime::from),
            Duration::from_millis(u64::try_from(row.jitter_offset_ms).unwrap_or(0)),
            tx.now,
        );
        let (next, retry_run_id) = match (resume, row.retry_run_id) {
            (Resume::CutShort { next }, Some(run_id)) => {
                // The occurrence after the retried one came while the verb was paused.
                let first = attempts(run_id, row.retry_attempts.as_deref());
                let started_at = first.first().and_then(|a| a.started_at);
                Statement::<D>::new(D::SQL.cut_short)
                    .bind(run_id)
                    .bind(RETRIES_CUT_SHORT.to_owned())
                    .bind(At(tx.now))
                    .bind(started_at.map(At))
                    .execute(&mut tx.tx)
                    .await
                    .map_err(db(&context))?;
                (next, None)
            }
            (Resume::CutShort { next } | Resume::At(next), retry_run_id) => (next, retry_run_id),
        };
        let reported = schedule
            .as_ref()
            .ok()
            .and_then(|schedule| reported_at_resume(schedule, tx.now));
        Statement::<D>::new(D::SQL.resume)
            .bind(row.id)
            .bind(next.map(At))
            .bind(retry_run_id)
            .bind(reported.map(At))
            .execute(&mut tx.tx)
            .await
            .map_err(db(&context))?;
    }
    let audit = Audit {
        actor,
        action: Action::Resume,
        before,
        note: None,
    };
    let state = changed_state(tx, &module, &verb, &context, audit).await?;
    Ok(pause_state(&module, &verb, changed, &state))
}

/// The audit trail's row of a pause or a resume: who, which, the state before it and the note.
struct Audit<'a> {
    actor: &'a Actor,
    action: Action,
    before: Vec<PauseRow>,
    note: Option<&'a str>,
}

/// The pause of `verb`'s rows of `module` (the active deployment's row first, then the newest), read
/// in `tx`.
async fn read_state<D: Dialect>(
    tx: &mut Write<D>,
    module: &str,
    verb: &str,
    context: &str,
) -> Result<Vec<PauseRow>, AdminError> {
    Ok(Statement::<D>::new(D::SQL.pause_state)
        .bind(module.to_owned())
        .bind(verb.to_owned())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(context))?)
}

/// Wakes the replicas of `module`, reads the pause of `verb`'s rows after the change, writes the audit
/// trail's row of the change and commits.
async fn changed_state<D: Dialect>(
    mut tx: Write<D>,
    module: &str,
    verb: &str,
    context: &str,
    audit: Audit<'_>,
) -> Result<Vec<PauseRow>, AdminError> {
    tx.notify(module).await.map_err(db(context))?;
    let rows = read_state(&mut tx, module, verb, context).await?;
    let recorded = Record {
        action: audit.action,
        module: Some(module),
        verb: Some(verb),
        before: Some(audited_pause(&audit.before)),
        after: Some(audited_pause(&rows)),
        note: audit.note,
    };
    record(&mut tx, audit.actor, recorded, context).await?;
    tx.commit().await.map_err(db(context))?;
    Ok(rows)
}

/// The pause of a verb as the audit trail keeps it: whether it is paused, and its note.
fn audited_pause(rows: &[PauseRow]) -> serde_json::Value {
    let first = rows.first();
    serde_json::json!({
        "paused": first.is_some_and(|r| r.paused),
        "note": first.and_then(|r| r.pause_note.as_deref()),
    })
}

/// [`Admin::trigger`](super::Admin::trigger).
pub(crate) async fn trigger<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
) -> Result<Triggered, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("triggering `{verb}`");
    let mut tx = admin.write(&context).await?;
    let active = tx.active_deployment(&module, &context).await?;
    let row: Option<TriggerRow> = Statement::<D>::new(D::SQL.lock_trigger_row)
        .bind(active.id)
        .bind(verb.clone())
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let Some(row) = row else {
        return Err(AdminError::NotInActiveDeployment {
            module,
            verb,
            deployment: active.key,
        });
    };
    if row.every_replica {
        return Err(AdminError::EveryReplica { verb });
    }
    // A regular run claimed ahead of its instant has not started: it does not refuse the trigger,
    // which is taken when that run ends (a job due every second is claimed that way nearly always).
    let executing = executing(&mut tx, &module, &verb, &context)
        .await?
        .into_iter()
        .find(|row| row.in_flight(tx.now));
    if let Some(executing) = executing {
        return Err(AdminError::Executing {
            verb,
            run_id: executing.current_run_id,
            started_at: executing.started_at.map(DateTime::from),
        });
    }
    let pending = row.trigger_requested_at.map(DateTime::from);
    let requested_at = match pending {
        Some(at) => at,
        None => {
            Statement::<D>::new(D::SQL.request_trigger)
                .bind(row.id)
                .bind(At(tx.now))
                .execute(&mut tx.tx)
                .await
                .map_err(db(&context))?;
            tx.notify(&module).await.map_err(db(&context))?;
            tx.now
        }
    };
    let triggered = Record {
        action: Action::Trigger,
        module: Some(&module),
        verb: Some(&verb),
        before: Some(serde_json::json!({ "trigger_pending": pending.map(rfc3339::format) })),
        after: Some(serde_json::json!({
            "trigger_pending": rfc3339::format(requested_at),
            "deployment": active.key,
        })),
        note: None,
    };
    record(&mut tx, actor, triggered, &context).await?;
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

/// The runs of every executing row of `verb` of `module`, whatever its deployment, read in `tx`: a
/// trigger and a cancel look for the one in flight among them, which need not be the first (during a
/// rolling deploy, a run claimed ahead on one deployment's row and one in flight on another's). Here, not
/// beside [`ExecutingRow`] in admin/rows.rs: it reads through admin/sql.rs, which imports rows.rs, and
/// scripts/check-cycles refuses modules that import each other.
pub(super) async fn executing<D: Dialect>(
    tx: &mut Write<D>,
    module: &str,
    verb: &str,
    context: &str,
) -> Result<Vec<ExecutingRow>, AdminError> {
    Ok(Statement::<D>::new(D::SQL.executing)
        .bind(module.to_owned())
        .bind(verb.to_owned())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(context))?)
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
        paused_at: first.and_then(|r| r.paused_at).map(DateTime::from),
        deployments: rows.len() as u64,
        next_execution: first
            .filter(|r| r.active && r.state == "idle")
            .and_then(|r| r.next_execution)
            .map(DateTime::from),
    }
}
