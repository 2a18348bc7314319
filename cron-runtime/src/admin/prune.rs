//! `prune`, on every store: deleting the runs that finished long ago, a batch at a time
//! (docs/operations.md, "Retention"). The runtime's own periodic retention runs the same batches.

use std::time::Duration;

use sqlx::Pool;

use super::rows::Ago;
use super::sql::{Dialect, Statement, unmigrated};
use super::{PRUNE_BATCH, PRUNE_BATCHES_PER_CALL};
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
