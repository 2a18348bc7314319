//! [`Store::overdue`](crate::store::Store::overdue) on every SQL store (docs/operations.md,
//! "Overdue"): `rules::overdue::OverdueRow`'s decision as SQL, written once for both databases
//! (parameters `$N` on both; an instant binds as each driver's `At`; a boolean column reads as one on
//! both). Each expected occurrence is one conditional `UPDATE` of its job's row: the database's row
//! lock (PostgreSQL re-reads the condition once it holds the row; SQLite writes one transaction at a
//! time) lets one replica alone set `overdue_notified_for` to the occurrence, and that replica reports
//! it. A job with `expect_within` is rare and the step runs every few seconds: one statement per job.

use super::run::Statement;
use super::values::At;
use super::{Protocol, SqlStore, db};
use crate::store::{Expected, Overdue, Runner, StoreError};

/// The facts of `rules::overdue::OverdueRow` both decisions share, on the row of verb `$2` of
/// deployment `$1` for the occurrence `$3`: the deployment is active, the job not paused and the
/// occurrence not before the row's `start_time`.
macro_rules! overdue_row {
    () => {
        "deployment_id = $1 AND verb = $2 AND NOT paused AND start_time <= $3
  AND EXISTS (SELECT 1 FROM cron_deployments d WHERE d.id = cron_jobs.deployment_id AND d.active)"
    };
}

/// A run of the row's verb (any deployment) of an occurrence at or after `$3` that succeeded, read on
/// the history's unique key (`module_name, verb, scheduled_at`) forward from the occurrence; the
/// condition that follows it narrows it.
macro_rules! success_from {
    () => {
        "SELECT 1 FROM cron_job_runs r
    WHERE r.module_name = cron_jobs.module_name AND r.verb = cron_jobs.verb
      AND r.scheduled_at >= $3 AND r.outcome = 'succeeded'"
    };
}

/// Records occurrence `$3` of verb `$2` of deployment `$1` as reported when no run of it or a later
/// one succeeded by its deadline `$4` and no replica reported it (or a later one) yet
/// (`OverdueRow::notifies`); returns the row's id when it did.
pub(crate) const NOTIFY_OVERDUE: &str = concat!(
    "UPDATE cron_jobs SET overdue_notified_for = $3 WHERE ",
    overdue_row!(),
    "
  AND NOT EXISTS (",
    success_from!(),
    " AND r.finished_at <= $4)
  AND (overdue_notified_for IS NULL OR overdue_notified_for < $3)
RETURNING id"
);

/// The row's id when occurrence `$3` of verb `$2` of deployment `$1` is overdue now, reported or not
/// (`OverdueRow::is_overdue`): no run of it or a later one has succeeded.
pub(crate) const IS_OVERDUE: &str = concat!(
    "SELECT id FROM cron_jobs WHERE ",
    overdue_row!(),
    "
  AND NOT EXISTS (",
    success_from!(),
    ")"
);

impl<D: Protocol> SqlStore<D> {
    /// [`Store::overdue`](crate::store::Store::overdue).
    pub(super) async fn overdue_of(
        &self,
        runner: &Runner,
        expected: &[Expected],
    ) -> Result<Vec<Overdue>, StoreError> {
        let context = "checking the jobs expected to have succeeded";
        let mut conn = self.pool.acquire().await.map_err(db(context))?;
        let mut found = Vec::new();
        for expected in expected {
            let statement = |text| {
                Statement::<D>::new(text)
                    .bind(runner.deployment_id)
                    .bind(expected.verb.clone())
                    .bind(At(expected.occurrence))
            };
            let notified: Option<(i64,)> = statement(NOTIFY_OVERDUE)
                .bind(At(expected.by))
                .fetch_optional(&mut *conn)
                .await
                .map_err(db(context))?;
            let notify = notified.is_some();
            let outstanding = statement(IS_OVERDUE)
                .fetch_optional::<(i64,)>(&mut *conn)
                .await
                .map_err(db(context))?
                .is_some();
            if outstanding || notify {
                found.push(Overdue {
                    verb: expected.verb.clone(),
                    occurrence: expected.occurrence,
                    notify,
                    outstanding,
                });
            }
        }
        Ok(found)
    }
}
