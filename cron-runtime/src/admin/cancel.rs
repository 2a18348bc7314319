//! `cancel`: asking the run of a verb in flight to stop (docs/operations.md, "Cancelling a run"). The
//! request is written on the run's row, with who asked and why, and the audit trail's row in the same
//! write transaction ([`SqlAdmin::write`]); its commit wakes the replicas (PostgreSQL's `NOTIFY`,
//! SQLite's `data_version`), and the one running it tells its handler (`Context::cancelled`). The
//! store ends the run `cancelled` with the request's text (`rules::End::finish`), never retried.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::audit::{Action, Actor, Record, record};
use super::lookup::resolve_verb;
use super::pause::executing;
use super::rows::{At, CancelRow, ExecutingRow, ResumeRow};
use super::runs::attempts;
use super::sql::{Dialect, SqlAdmin, Statement, Write, db};
use crate::rfc3339;
use crate::store::rules::operator::{after_cancelled_retry, cancelled_by};

/// The result of [`Admin::cancel`](super::Admin::cancel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cancelled {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The run asked to stop.
    pub run_id: i64,
    /// When it was asked to (the first request's instant, when it had been asked already).
    #[serde(with = "rfc3339")]
    pub requested_at: DateTime<Utc>,
    /// Who asked: this call's actor, or the first request's.
    pub requested_by: String,
    /// The note of the request.
    pub note: Option<String>,
    /// The run had been asked to stop already; this call changed nothing.
    pub already_requested: bool,
    /// The occurrence was waiting for its retry, not in flight: its run is recorded `cancelled` now,
    /// with no more retries, and no handler had to be told.
    pub ended: bool,
}

/// [`Admin::cancel`](super::Admin::cancel).
pub(crate) async fn cancel<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
    note: Option<&str>,
) -> Result<Cancelled, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("cancelling the run of `{verb}`");
    let mut tx = admin.write(&context).await?;
    // The module's lock before the verb's rows, so that a takeover in flight commits first
    // (`lock_module`).
    tx.lock_module(&module, &context).await?;
    // The verb's rows are locked first, as a finish locks its run's row with the run's: a run that
    // ends meanwhile is read ended (or waiting for its retry), not asked to stop after its end.
    let rows: Vec<ResumeRow> = Statement::<D>::new(D::SQL.lock_for_resume)
        .bind(module.clone())
        .bind(verb.clone())
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    // The run in flight as a trigger sees it, or a retry claimed ahead of its instant: a regular run
    // claimed ahead that has not started is not (`rules::operator::cancellable`). Any of the verb's
    // executing rows may hold it, whatever its deployment.
    let executing =
        ExecutingRow::asked(executing(&mut tx, &module, &verb, &context).await?, tx.now);
    let Some(ExecutingRow { current_run_id, .. }) = executing else {
        // An occurrence waiting for its retry retries no more.
        let retrying = rows.into_iter().find(|row| {
            row.state == "idle" && row.retry_run_id.is_some() && row.retry_of.is_some()
        });
        let Some(row) = retrying else {
            return Err(AdminError::NothingRunning { verb });
        };
        return cancel_retry(admin, tx, actor, (module, verb), row, note, &context).await;
    };
    let asked = Statement::<D>::new(D::SQL.request_cancel)
        .bind(current_run_id)
        .bind(At(tx.now))
        .bind(actor.name().to_owned())
        .bind(note.map(str::to_owned))
        .execute(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let run: Option<CancelRow> = Statement::<D>::new(D::SQL.cancel_of)
        .bind(current_run_id)
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    // Ended between the two statements: nothing to stop.
    let Some(CancelRow {
        outcome,
        cancel_requested_at: Some(At(requested_at)),
        cancel_requested_by: Some(requested_by),
        cancel_note,
    }) = run.filter(|run| run.outcome == "running")
    else {
        return Err(AdminError::NothingRunning { verb });
    };
    let already_requested = asked == 0;
    if !already_requested {
        tx.notify(&module).await.map_err(db(&context))?;
    }
    let recorded = Record {
        action: Action::Cancel,
        module: Some(&module),
        verb: Some(&verb),
        before: Some(serde_json::json!({ "run_id": current_run_id, "outcome": outcome })),
        after: Some(serde_json::json!({
            "run_id": current_run_id,
            "cancel_requested_by": requested_by,
            "cancel_requested_at": rfc3339::format(requested_at),
        })),
        note,
    };
    record(&mut tx, actor, recorded, &context).await?;
    tx.commit().await.map_err(db(&context))?;
    Ok(Cancelled {
        module,
        verb,
        run_id: current_run_id,
        requested_at,
        requested_by,
        note: cancel_note,
        already_requested,
        ended: false,
    })
}

/// Ends `cancelled` the occurrence whose retry `row` holds (locked): its run with the request on it,
/// and the row going on at the regular occurrence after it (`rules::operator::after_cancelled_retry`),
/// with the audit trail's row (docs/operations.md, "Cancelling a run").
async fn cancel_retry<D: Dialect>(
    admin: &SqlAdmin<D>,
    mut tx: Write<D>,
    actor: &Actor,
    (module, verb): (String, String),
    row: ResumeRow,
    note: Option<&str>,
    context: &str,
) -> Result<Cancelled, AdminError> {
    let (Some(run_id), Some(At(retry_of))) = (row.retry_run_id, row.retry_of) else {
        return Err(AdminError::NothingRunning { verb });
    };
    let first = attempts(run_id, row.retry_attempts.as_deref());
    let started_at = first.first().and_then(|a| a.started_at);
    let error = cancelled_by(actor.name(), note);
    let ended = Statement::<D>::new(D::SQL.cancel_retry)
        .bind(run_id)
        .bind(error)
        .bind(At(tx.now))
        .bind(started_at.map(At))
        .bind(actor.name().to_owned())
        .bind(note.map(str::to_owned))
        .execute(&mut tx.tx)
        .await
        .map_err(db(context))?;
    if ended == 0 {
        return Err(AdminError::NothingRunning { verb });
    }
    let schedule = admin.schedule(&row.schedule, &row.timezone);
    let next = after_cancelled_retry(
        schedule.as_ref().ok(),
        retry_of,
        row.next_execution.map(DateTime::from),
        tx.now,
    );
    Statement::<D>::new(D::SQL.retry_cancelled)
        .bind(row.id)
        .bind(next.map(At))
        .execute(&mut tx.tx)
        .await
        .map_err(db(context))?;
    tx.notify(&module).await.map_err(db(context))?;
    let recorded = Record {
        action: Action::Cancel,
        module: Some(&module),
        verb: Some(&verb),
        before: Some(serde_json::json!({ "run_id": run_id, "outcome": "retrying" })),
        after: Some(serde_json::json!({
            "run_id": run_id,
            "outcome": "cancelled",
            "cancel_requested_by": actor.name(),
            "cancel_requested_at": rfc3339::format(tx.now),
        })),
        note,
    };
    record(&mut tx, actor, recorded, context).await?;
    let requested_at = tx.now;
    tx.commit().await.map_err(db(context))?;
    Ok(Cancelled {
        module,
        verb,
        run_id,
        requested_at,
        requested_by: actor.name().to_owned(),
        note: note.map(str::to_owned),
        already_requested: false,
        ended: true,
    })
}
