//! `reschedule` and its `--reset`: running a verb on another schedule than its code's without a build,
//! and back (docs/operations.md, "Changing a schedule without a build"). One write transaction: the
//! verb's rows in every deployment of its module take the new schedule (each going on where
//! `store::rules::reschedule` says), the override is kept for the deployments registered later, the
//! replicas are woken, and the audit trail records the schedule before and after.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::audit::{Action, Actor, Record, record};
use super::lookup::resolve_verb;
use super::rows::{At, RescheduleRow};
use super::sql::{Dialect, SqlAdmin, Statement, db};
use crate::rfc3339;
use crate::store::rules::reschedule::{
    check, overrides_to, refusal, rescheduled, retarget, speaks_for, without_its_verb,
};

/// The result of [`Admin::reschedule`](super::Admin::reschedule) and
/// [`Admin::reset_schedule`](super::Admin::reset_schedule): the schedule the verb runs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rescheduled {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The expression it runs now.
    pub expression: String,
    /// The zone it runs in now.
    pub timezone: String,
    /// The expression its code declares (its active deployment's, else its newest row's).
    pub code_expression: String,
    /// The zone its code declares.
    pub code_timezone: String,
    /// Whether an override runs instead of the code's schedule.
    pub overridden: bool,
    /// Whether the call changed what any row runs (false: it ran that schedule already).
    pub changed: bool,
    /// The rows of the verb: one per deployment of the module that has it.
    pub deployments: u64,
    /// The next occurrence of the active deployment's row, on the schedule it runs now; `None` while
    /// a run of it executes (its end decides) or when the module has no active row.
    #[serde(with = "rfc3339::option")]
    pub next_execution: Option<DateTime<Utc>>,
}

/// [`Admin::reschedule`](super::Admin::reschedule) (`to`: the expression and zone) and
/// [`Admin::reset_schedule`](super::Admin::reset_schedule) (`to` is `None`).
pub(crate) async fn reschedule<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
    to: Option<(&str, Option<&str>)>,
    note: Option<&str>,
) -> Result<Rescheduled, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = match to {
        Some(_) => format!("rescheduling `{verb}`"),
        None => format!("resetting the schedule of `{verb}`"),
    };
    let mut tx = admin.write(&context).await?;
    // The module's lock before the verb's rows, as a registration of the module's job rows takes it
    // before it reads the overrides: each sees the other committed, and every row of the verb ends on
    // one schedule (the takeover's lock; SQLite writes one transaction at a time).
    tx.lock_module(&module, &context).await?;
    let rows: Vec<RescheduleRow> = Statement::<D>::new(D::SQL.lock_for_reschedule)
        .bind(module.clone())
        .bind(verb.clone())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let Some(first) = speaks_for(&rows, |row| row.active) else {
        return Err(AdminError::RescheduleRefused(format!(
            "`{verb}` has no job rows"
        )));
    };
    if to.is_some()
        && let Some(refused) = refusal(&verb, first.every_replica, first.fixed)
    {
        return Err(AdminError::RescheduleRefused(refused));
    }
    // Read under the module's lock: a takeover by code without the verb is committed, or waits.
    let active_without_it = if rows.iter().any(|row| row.active) {
        None
    } else {
        match tx.active_deployment(&module, &context).await {
            Ok(active) => Some(active.key),
            Err(AdminError::NoActiveDeployment { .. }) => None,
            Err(e) => return Err(e),
        }
    };
    if to.is_some()
        && let Some(refused) = without_its_verb(&verb, active_without_it.as_deref())
    {
        return Err(AdminError::RescheduleRefused(refused));
    }
    let jitter = first
        .jitter_ms
        .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
    // Without a zone, the expression is read in the code's. An override to the code's own schedule
    // is a reset: no target, each row back to its own code's.
    let first_code = code_of(first);
    let target = match to {
        Some((expression, zone)) => {
            let zone = zone.unwrap_or(&first_code.1);
            let schedule =
                check(expression, zone, jitter).map_err(AdminError::RescheduleRefused)?;
            overrides_to((expression, zone), (&first_code.0, &first_code.1))
                .map(|(expression, zone)| (expression, zone, schedule))
        }
        None => None,
    };
    let audited_before = serde_json::json!({
        "schedule": first.schedule,
        "timezone": first.timezone,
        "overridden": first.code_schedule.is_some(),
    });

    let mut changed = false;
    let mut after: Option<(String, String, Option<DateTime<Utc>>)> = None;
    for row in &rows {
        let code = code_of(row);
        let Some(runs) = retarget::<str>(
            target
                .as_ref()
                .map(|(expression, zone, schedule)| (*expression, *zone, schedule)),
            (&code.0, &code.1),
            || admin.schedule(&code.0, &code.1).ok(),
            (&row.schedule, &row.timezone, row.code_schedule.is_some()),
            row.fixed,
        ) else {
            continue;
        };
        let next_execution = row.next_execution.map(DateTime::from);
        let next = if runs.changes {
            changed = true;
            let moved = rescheduled(
                &runs.schedule,
                row.state == "idle",
                row.retry_pending,
                next_execution,
                tx.now,
            );
            Statement::<D>::new(D::STEPS.reschedule_row)
                .bind(row.id)
                .bind(runs.expression.clone())
                .bind(runs.zone.clone())
                .bind(runs.overridden.then(|| code.0.clone()))
                .bind(runs.overridden.then(|| code.1.clone()))
                .bind(moved.next_execution.map(At))
                .bind(At(moved.start_time))
                .execute(&mut tx.tx)
                .await
                .map_err(db(&context))?;
            moved.next_execution
        } else {
            next_execution
        };
        let (expression, zone) = (runs.expression, runs.zone);
        if std::ptr::eq(row, first) {
            after = Some((expression, zone, next.filter(|_| row.state == "idle")));
        }
    }
    match &target {
        Some((expression, zone, _)) => {
            Statement::<D>::new(D::SQL.set_override)
                .bind(module.clone())
                .bind(verb.clone())
                .bind((*expression).to_owned())
                .bind((*zone).to_owned())
                .bind(actor.name().to_owned())
                .bind(At(tx.now))
                .bind(note.map(str::to_owned))
                .execute(&mut tx.tx)
                .await
                .map_err(db(&context))?;
        }
        None => {
            Statement::<D>::new(D::STEPS.drop_override)
                .bind(module.clone())
                .bind(verb.clone())
                .execute(&mut tx.tx)
                .await
                .map_err(db(&context))?;
        }
    }
    tx.notify(&module).await.map_err(db(&context))?;

    let code = code_of(first);
    let (expression, timezone, next_execution) =
        after.unwrap_or_else(|| (first.schedule.clone(), first.timezone.clone(), None));
    let overridden = (expression.as_str(), timezone.as_str()) != (code.0.as_str(), code.1.as_str());
    let audited_after = serde_json::json!({
        "schedule": expression,
        "timezone": timezone,
        "overridden": overridden,
    });
    let recorded = Record {
        action: match to {
            Some(_) => Action::Reschedule,
            None => Action::ResetSchedule,
        },
        module: Some(&module),
        verb: Some(&verb),
        before: Some(audited_before),
        after: Some(audited_after),
        note,
    };
    record(&mut tx, actor, recorded, &context).await?;
    tx.commit().await.map_err(db(&context))?;
    Ok(Rescheduled {
        deployments: rows.len() as u64,
        module,
        verb,
        expression,
        timezone,
        code_expression: code.0,
        code_timezone: code.1,
        overridden,
        changed,
        next_execution,
    })
}

/// The code's expression and zone of a row: its own unless it runs an override.
fn code_of(row: &RescheduleRow) -> (String, String) {
    (
        row.code_schedule
            .clone()
            .unwrap_or_else(|| row.schedule.clone()),
        row.code_timezone
            .clone()
            .unwrap_or_else(|| row.timezone.clone()),
    )
}
