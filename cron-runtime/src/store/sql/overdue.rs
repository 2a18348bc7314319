//! [`Store::overdue`](crate::store::Store::overdue) on every SQL store (docs/operations.md,
//! "Overdue"), and [`Store::running_schedules`](crate::store::Store::running_schedules), the schedules
//! whose occurrences it is asked about (one statement). A check is one transaction of at most two
//! statements, whatever the number of jobs: one reads the facts of every expected occurrence's row
//! ([`overdue_rows!`], `rules::overdue::OverdueRow`) and locks those rows, the rule decides in Rust, and
//! one records the occurrences decided reported ([`mark_overdue!`]). The rows stay locked from the read
//! to the commit (PostgreSQL's row locks, in the order of their ids; SQLite's write transaction), so a
//! pause, a takeover or another replica's check that writes them either commits before the read, which
//! then sees it, or waits for the commit: the record writes what the rule decided and checks nothing
//! again, and each occurrence is recorded, and reported, by one replica alone.

use std::collections::HashMap;

use cron_schema::ZonedSchedule;

use super::run::Statement;
use super::values::{At, Column, Rows};
use super::{Protocol, SqlStore, db};
use crate::store::rules::overdue::OverdueRow;
use crate::store::{Expected, Overdue, Runner, StoreError};

/// The facts of `rules::overdue::OverdueRow` for each expected occurrence (verb, occurrence, deadline
/// `e(verb, occurrence, deadline)`, bound as `$expected`) of a row of deployment `$deployment`, as
/// [`OverdueFacts`] reads them, the rows locked where the database locks rows (`lock`: the job rows in
/// the order of their ids, and their deployment's row shared, as a claim locks it, so that a takeover
/// that deactivated it while the read waited is seen): one statement for every job of a check. The
/// occurrences bound are the outer loop (`CROSS JOIN` keeps SQLite from walking every row of the
/// deployment and the whole batch for each), each finding its row on `(deployment_id, verb)`; a
/// success is read on the history's unique key (`module_name, verb, scheduled_at`) forward from the
/// occurrence. The one definition of [`Steps::overdue_rows`](super::Steps::overdue_rows), each
/// database spelling how its parameters bind and its lock.
macro_rules! overdue_rows {
    (deployment: $deployment:literal, expected: $expected:literal, lock: $lock:literal $(,)?) => {
        concat!(
            "
SELECT j.id, e.verb, d.active, j.paused, j.start_time,
       EXISTS (SELECT 1 FROM cron_job_runs r
               WHERE r.module_name = j.module_name AND r.verb = j.verb
                 AND r.scheduled_at >= e.occurrence AND r.outcome = 'succeeded') AS succeeded_since,
       EXISTS (SELECT 1 FROM cron_job_runs r
               WHERE r.module_name = j.module_name AND r.verb = j.verb
                 AND r.scheduled_at >= e.occurrence AND r.outcome = 'succeeded'
                 AND r.finished_at <= e.deadline) AS succeeded_in_time,
       j.overdue_notified_for
FROM ",
            $expected,
            "
CROSS JOIN cron_jobs j
JOIN cron_deployments d ON d.id = j.deployment_id
WHERE j.deployment_id = ",
            $deployment,
            " AND j.verb = e.verb
",
            $lock
        )
    };
}
pub(crate) use overdue_rows;

/// Records each row `w.id` as having reported occurrence `w.occurrence` (`w`, bound as `$rows`): the
/// rows the rule decided reported, which the check's transaction holds since it read them. The one
/// definition of [`Steps::mark_overdue`](super::Steps::mark_overdue).
macro_rules! mark_overdue {
    (rows: $rows:literal $(,)?) => {
        concat!(
            "
UPDATE cron_jobs SET overdue_notified_for = w.occurrence
FROM ",
            $rows,
            "
WHERE cron_jobs.id = w.id
"
        )
    };
}
pub(crate) use mark_overdue;

/// A row's facts for its expected occurrence, as [`Steps::overdue_rows`](super::Steps::overdue_rows)
/// reads them.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct OverdueFacts {
    id: i64,
    verb: String,
    active: bool,
    paused: bool,
    start_time: At,
    succeeded_since: bool,
    succeeded_in_time: bool,
    overdue_notified_for: Option<At>,
}

impl OverdueFacts {
    fn row(&self) -> OverdueRow {
        OverdueRow {
            active: self.active,
            paused: self.paused,
            start_time: self.start_time.0,
            succeeded_since: self.succeeded_since,
            succeeded_in_time: self.succeeded_in_time,
            notified_for: self.overdue_notified_for.map(|at| at.0),
        }
    }
}

/// A row of [`Steps::running_schedules`](super::Steps::running_schedules).
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct Running {
    id: i64,
    verb: String,
    schedule: String,
    timezone: String,
}

impl<D: Protocol> SqlStore<D> {
    /// [`Store::running_schedules`](crate::store::Store::running_schedules): each row's text, parsed
    /// once by its text; a row that does not parse is reported once and left out.
    pub(super) async fn running_schedules_of(
        &self,
        runner: &Runner,
    ) -> Result<Vec<(String, ZonedSchedule)>, StoreError> {
        let context = "reading the schedules the jobs run";
        let mut conn = self.pool.acquire().await.map_err(db(context))?;
        let rows: Vec<Running> = Statement::<D>::new(D::STEPS.running_schedules)
            .bind(runner.deployment_id)
            .fetch_all(&mut *conn)
            .await
            .map_err(db(context))?;
        let schedules = &self.shared.schedules;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let schedule = schedules.of_row(row.id, &row.verb, &row.schedule, &row.timezone)?;
                Some((row.verb, schedule))
            })
            .collect())
    }

    /// [`Store::overdue`](crate::store::Store::overdue).
    pub(super) async fn overdue_of(
        &self,
        runner: &Runner,
        expected: &[Expected],
    ) -> Result<Vec<Overdue>, StoreError> {
        let context = "checking the jobs expected to have succeeded";
        if expected.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await.map_err(db(context))?;
        let rows = Rows((
            expected
                .iter()
                .map(|e| e.verb.clone())
                .collect::<Column<_>>(),
            expected
                .iter()
                .map(|e| At(e.occurrence))
                .collect::<Column<_>>(),
            expected.iter().map(|e| At(e.by)).collect::<Column<_>>(),
        ));
        let facts: Vec<OverdueFacts> = Statement::<D>::new(D::STEPS.overdue_rows)
            .bind(runner.deployment_id)
            .bind(rows)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(context))?;
        let facts: HashMap<&str, &OverdueFacts> =
            facts.iter().map(|f| (f.verb.as_str(), f)).collect();
        // Each expected occurrence's decision, in their order, by the rule alone, on the rows this
        // transaction holds: (row id, expected, overdue now, reported by this replica).
        let decided: Vec<(i64, &Expected, bool, bool)> = expected
            .iter()
            .filter_map(|expected| {
                let facts = facts.get(expected.verb.as_str())?;
                let row = facts.row();
                Some((
                    facts.id,
                    expected,
                    row.is_overdue(expected.occurrence),
                    row.notifies(expected.occurrence),
                ))
            })
            .collect();
        let to_mark: Vec<(i64, At)> = decided
            .iter()
            .filter(|(.., notifies)| *notifies)
            .map(|(id, expected, ..)| (*id, At(expected.occurrence)))
            .collect();
        if !to_mark.is_empty() {
            let rows = Rows((
                to_mark.iter().map(|(id, _)| *id).collect::<Column<_>>(),
                to_mark.iter().map(|(_, at)| *at).collect::<Column<_>>(),
            ));
            Statement::<D>::new(D::STEPS.mark_overdue)
                .bind(rows)
                .execute(&mut *tx)
                .await
                .map_err(db(context))?;
        }
        tx.commit().await.map_err(db(context))?;
        Ok(decided
            .into_iter()
            .filter(|(_, _, outstanding, notify)| *outstanding || *notify)
            .map(|(_, expected, outstanding, notify)| Overdue {
                verb: expected.verb.clone(),
                occurrence: expected.occurrence,
                notify,
                outstanding,
            })
            .collect())
    }
}
