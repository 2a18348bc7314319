//! `prune`, on every store: deleting the runs that finished long ago, a batch at a time
//! (docs/operations.md, "Retention"). The runtime's own periodic retention runs the same batches and
//! writes no row of the audit trail; an operator's prune writes one with its last batch, and only an
//! operator prunes the audit trail (docs/operations.md, "Audit trail").

use std::time::Duration;

use sqlx::Pool;

use serde_json::json;

use super::audit::{self, Actor, Record, record};
use super::rows::Ago;
use super::sql::{Dialect, SqlAdmin, Statement, db, unmigrated};
use super::{AdminError, PRUNE_BATCH, PRUNE_BATCHES_PER_CALL};
use crate::store::StoreError;

/// Deletes the runs that finished more than `older_than` ago on `pool`, `batch` per statement (each
/// committed on its own, so that the replicas' claims wait for one batch at most), until a statement
/// deletes fewer or `max_batches` statements ran. Returns how many it deleted.
pub(crate) async fn prune<D: Dialect>(
    pool: &Pool<D>,
    older_than: Duration,
    batch: u32,
    max_batches: Option<u32>,
) -> Result<u64, StoreError> {
    let context = "pruning the run history";
    let batch = batch.max(1);
    let mut conn = pool.acquire().await.map_err(unmigrated::<D>(context))?;
    let mut deleted = 0;
    for _ in 0..max_batches.map_or(u32::MAX, |max| max.max(1)) {
        let done = Statement::<D>::new(D::SQL.prune)
            .bind(Ago(older_than))
            .bind(i64::from(batch))
            .execute(&mut conn)
            .await
            .map_err(unmigrated::<D>(context))?;
        deleted += done;
        if done < u64::from(batch) {
            break;
        }
    }
    Ok(deleted)
}

/// The runtime's periodic retention on `pool`: [`PRUNE_BATCH`] runs per statement, at most
/// [`PRUNE_BATCHES_PER_CALL`] statements, so that each call does a bounded amount of work and the next
/// continues.
pub(crate) async fn retention<D: Dialect>(
    pool: &Pool<D>,
    older_than: Duration,
) -> Result<u64, StoreError> {
    prune(pool, older_than, PRUNE_BATCH, Some(PRUNE_BATCHES_PER_CALL)).await
}

/// [`Admin::prune`](super::Admin::prune): the batches of [`prune`], each its own write transaction,
/// the last (the one that deletes fewer than `batch`) also writing the audit trail's row with the total.
/// A prune that fails after some batches committed keeps them, without a row.
pub(crate) async fn prune_audited<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    older_than: Duration,
    batch: u32,
) -> Result<u64, AdminError> {
    let context = "pruning the run history";
    let batch = batch.max(1);
    let mut deleted = 0;
    loop {
        let mut tx = admin.write(context).await?;
        let done = Statement::<D>::new(D::SQL.prune)
            .bind(Ago(older_than))
            .bind(i64::from(batch))
            .execute(&mut tx.tx)
            .await
            .map_err(db(context))?;
        deleted += done;
        if done < u64::from(batch) {
            let after = json!({ "older_than_secs": older_than.as_secs(), "runs_deleted": deleted });
            record(&mut tx, actor, Record::prune(after), context).await?;
            tx.commit().await.map_err(db(context))?;
            return Ok(deleted);
        }
        tx.commit().await.map_err(db(context))?;
    }
}

/// [`Admin::prune_audit`](super::Admin::prune_audit): one write transaction deleting the old rows of
/// the audit trail and writing the row that records it.
pub(crate) async fn prune_audit_trail<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    older_than: Duration,
) -> Result<u64, AdminError> {
    let context = "pruning the audit trail";
    let mut tx = admin.write(context).await?;
    let deleted = audit::prune(&mut tx, older_than)
        .await
        .map_err(unmigrated::<D>(context))?;
    let after = json!({ "audit_older_than_secs": older_than.as_secs(), "audit_deleted": deleted });
    record(&mut tx, actor, Record::prune(after), context).await?;
    tx.commit().await.map_err(db(context))?;
    Ok(deleted)
}
