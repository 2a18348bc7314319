//! `prune`, on every store: deleting the runs that finished long ago, a batch at a time, through the
//! statement of [`Prune`] (docs/operations.md, "Retention").

use std::future::Future;
use std::time::Duration;

use super::AdminError;
use super::tables::{Tables, read};

/// The statement of `prune`.
pub(crate) trait Prune: Tables {
    /// Deletes up to `batch` runs that were scheduled and finished more than `older_than` ago, never a
    /// running one, the oldest first, and returns how many: one statement, committed on its own so that
    /// the replicas' claims wait for one batch at most.
    fn prune_batch(
        &self,
        older_than: Duration,
        batch: u32,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
}

/// [`Admin::prune`](super::Admin::prune).
pub(crate) async fn prune<B: Prune>(
    backend: &B,
    older_than: Duration,
    batch: u32,
) -> Result<u64, AdminError> {
    let context = "pruning the run history";
    let batch = batch.max(1);
    let mut deleted = 0;
    loop {
        let done = backend
            .prune_batch(older_than, batch)
            .await
            .map_err(read::<B>(context))?;
        deleted += done;
        if done < u64::from(batch) {
            return Ok(deleted);
        }
    }
}
