//! `prune`: deleting the runs that finished long ago (docs/operations.md, "Retention").

use std::time::Duration;

use super::{SqliteAdmin, admin_db};
use crate::admin::AdminError;
use crate::store::sqlite::{db, micros, micros_of};

/// Deletes up to `?2` runs that were scheduled and finished before the instant `?1`, never a running
/// one, the oldest first. A run finishes after its scheduled instant, so the runs that finished before
/// the cutoff are among those scheduled before it, which the index on `scheduled_at` reads oldest first.
const PRUNE: &str = "\
    DELETE FROM cron_job_runs WHERE id IN ( \
        SELECT id FROM cron_job_runs \
        WHERE scheduled_at < ?1 AND finished_at < ?1 AND outcome <> 'running' \
        ORDER BY scheduled_at \
        LIMIT ?2)";

impl SqliteAdmin {
    /// [`Admin::prune`](crate::admin::Admin::prune) on SQLite: each batch its own write transaction, so
    /// that the replicas' claims wait for one batch at most.
    pub(crate) async fn prune(&self, older_than: Duration, batch: u32) -> Result<u64, AdminError> {
        let context = "pruning the run history";
        let batch = batch.max(1);
        let mut deleted = 0;
        loop {
            let (mut tx, now) = self.begin(context).await?;
            let done = sqlx::query(PRUNE)
                .bind(micros(now) - micros_of(older_than))
                .bind(i64::from(batch))
                .execute(&mut *tx)
                .await
                .map_err(admin_db(context))?
                .rows_affected();
            tx.commit().await.map_err(db(context))?;
            deleted += done;
            if done < u64::from(batch) {
                return Ok(deleted);
            }
        }
    }
}
