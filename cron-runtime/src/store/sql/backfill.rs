//! The backfill queue's statements that the store's steps run (docs/operations.md, "Backfill";
//! `rules::backfill`), written once for both databases: sqlx's SQLite driver reads `$N` parameters as
//! PostgreSQL's does, and an instant binds as each driver's `At`. Which queued occurrence a claim takes
//! is part of each database's claim (`backfill` in its `claim_due`), which reads the queue with the
//! other due rows.

/// Drops the queued occurrence `$3` of verb `$2` of module `$1`: a claim took it (its run is recorded,
/// or it had one already).
pub(crate) const DROP_QUEUED: &str = "
DELETE FROM cron_backfills WHERE module_name = $1 AND verb = $2 AND scheduled_at = $3
";
