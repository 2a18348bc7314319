//! The statement of `prune` on SQLite, which `crate::admin::prune` runs: deleting the runs that finished
//! long ago (docs/operations.md, "Retention").

/// Deletes up to `?2` runs that were scheduled and finished before the instant `?1`, never a running
/// one, the oldest first. A run finishes after its scheduled instant, so the runs that finished before
/// the cutoff are among those scheduled before it, which the index on `scheduled_at` reads oldest first.
pub(super) const PRUNE: &str = "\
    DELETE FROM cron_job_runs WHERE id IN ( \
        SELECT id FROM cron_job_runs \
        WHERE scheduled_at < ?1 AND finished_at < ?1 AND outcome <> 'running' \
        ORDER BY scheduled_at \
        LIMIT ?2)";
