//! Retention: deleting the runs that finished long ago, for `cronverb prune` and for the runtime's own
//! periodic retention (one rule, docs/operations.md, "Retention").

use std::time::Duration;

use sqlx::PgPool;

use crate::admin::prune::prune;
use crate::store::StoreError;

/// How many pruning statements one call of the runtime's retention runs at most.
pub(in crate::store::postgres) const PRUNE_BATCHES_PER_CALL: u32 = 10;

/// Deletes up to `$2` runs that were scheduled and finished more than `$1` seconds ago, never a running
/// one, the oldest first.
///
/// A run finishes after its scheduled instant, so the runs that finished before the cutoff are among
/// those scheduled before it, which the index on `scheduled_at` reads oldest first (`finished_at` has no
/// index: a finish that changes no indexed column writes no index entry).
pub(super) const PRUNE: &str = "\
    DELETE FROM cron_job_runs WHERE id IN ( \
        SELECT id FROM cron_job_runs \
        WHERE scheduled_at < now() - make_interval(secs => $1) \
          AND finished_at < now() - make_interval(secs => $1) \
          AND outcome <> 'running' \
        ORDER BY scheduled_at \
        LIMIT $2)";

/// The runtime's periodic retention: [`Admin::prune`](crate::admin::Admin::prune)'s batches, stopping
/// after `max_batches` statements, so that each call does a bounded amount of work
/// ([`PRUNE_BATCHES_PER_CALL`]) and continues at the next.
pub(in crate::store::postgres) async fn prune_batches(
    pool: &PgPool,
    older_than: Duration,
    batch: u32,
    max_batches: u32,
) -> Result<u64, StoreError> {
    prune(pool, older_than, batch, Some(max_batches)).await
}
