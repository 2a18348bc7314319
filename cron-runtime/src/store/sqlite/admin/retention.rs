//! The statement of `prune` on SQLite, which `crate::admin::prune` runs: deleting the runs that finished
//! long ago (docs/operations.md, "Retention").

use std::time::Duration;

use super::SqliteAdmin;
use crate::admin::prune::Prune;
use crate::store::sqlite::{micros, micros_of, now};

/// Deletes up to `?2` runs that were scheduled and finished before the instant `?1`, never a running
/// one, the oldest first. A run finishes after its scheduled instant, so the runs that finished before
/// the cutoff are among those scheduled before it, which the index on `scheduled_at` reads oldest first.
const PRUNE: &str = "\
    DELETE FROM cron_job_runs WHERE id IN ( \
        SELECT id FROM cron_job_runs \
        WHERE scheduled_at < ?1 AND finished_at < ?1 AND outcome <> 'running' \
        ORDER BY scheduled_at \
        LIMIT ?2)";

impl Prune for SqliteAdmin {
    /// One write transaction per batch.
    async fn prune_batch(&self, older_than: Duration, batch: u32) -> Result<u64, sqlx::Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let done = sqlx::query(PRUNE)
            .bind(micros(now()) - micros_of(older_than))
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(done)
    }
}
