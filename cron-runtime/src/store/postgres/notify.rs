//! Waking the other replicas: notifications sent when the transaction commits (docs/runtime.md, "Waking
//! up"). `listen.rs` receives them.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::sql::notify::{NOTIFY_DEPLOYMENT, NOTIFY_DUE, NOTIFY_MODULES};
use super::{DUE_CHANNEL, NOTIFY_CHANNEL, REPLICAS_CHANNEL};

/// Wakes the replicas of `module` when the transaction commits ([`NOTIFY_CHANNEL`]).
pub(super) async fn notify(tx: &mut PgConnection, module: &str) -> Result<(), sqlx::Error> {
    notify_modules(tx, &[module]).await
}

/// Wakes the replicas of each of `modules` when the transaction commits ([`NOTIFY_CHANNEL`]).
pub(super) async fn notify_modules(
    tx: &mut PgConnection,
    modules: &[&str],
) -> Result<(), sqlx::Error> {
    if modules.is_empty() {
        return Ok(());
    }
    sqlx::query(NOTIFY_MODULES)
        .bind(NOTIFY_CHANNEL)
        .bind(modules)
        .execute(tx)
        .await?;
    Ok(())
}

/// Tells the replicas of each module when its jobs that just went back to idle are next due, when the
/// transaction commits ([`DUE_CHANNEL`]): one notification per module, with its earliest instant. A
/// replica that held nothing when another one ran the job, and so never saw its next occurrence, wakes
/// up for it even if that replica dies before then (docs/runtime.md, "Waking up").
pub(super) async fn notify_due(
    tx: &mut PgConnection,
    idle: Vec<(&str, DateTime<Utc>)>,
) -> Result<(), sqlx::Error> {
    let mut earliest: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for (module, next) in idle {
        earliest
            .entry(module)
            .and_modify(|at| *at = (*at).min(next))
            .or_insert(next);
    }
    if earliest.is_empty() {
        return Ok(());
    }
    let payloads: Vec<String> = earliest
        .into_iter()
        .map(|(module, at)| format!("{module}\t{}", at.timestamp_micros()))
        .collect();
    sqlx::query(NOTIFY_DUE)
        .bind(DUE_CHANNEL)
        .bind(&payloads)
        .execute(tx)
        .await?;
    Ok(())
}

/// Tells the replicas of a deployment's module that its live replicas changed when the transaction
/// commits ([`REPLICAS_CHANNEL`]), and wakes them ([`NOTIFY_CHANNEL`]).
pub(super) async fn notify_deployment(
    tx: &mut PgConnection,
    deployment_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(NOTIFY_DEPLOYMENT)
        .bind(&[NOTIFY_CHANNEL, REPLICAS_CHANNEL][..])
        .bind(deployment_id)
        .execute(tx)
        .await?;
    Ok(())
}
