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
use super::rows::{At, CancelRow, ExecutingRow};
use super::sql::{Dialect, SqlAdmin, Statement, db};
use crate::rfc3339;

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
    // The run in flight as a trigger sees it: a regular run claimed ahead that has not started is not.
    let executing: Option<ExecutingRow> = Statement::<D>::new(D::SQL.executing)
        .bind(module.clone())
        .bind(verb.clone())
        .bind(At(tx.now))
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let Some(ExecutingRow { current_run_id, .. }) = executing else {
        return Err(AdminError::NothingRunning { verb });
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
    })
}
