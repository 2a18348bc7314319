//! [`Store::overdue`](crate::store::Store::overdue) in memory: `rules::overdue`'s decision over the
//! rows, under the store's lock (docs/operations.md, "Overdue").

use cron_schema::{RunOn, ZonedSchedule};

use super::tables::State;
use crate::store::rules::overdue::OverdueRow;
use crate::store::{Expected, Overdue, Runner};

impl State {
    /// The schedule each claimable job of the runner's deployment runs now: its row's (the code's or
    /// an override's), by verb.
    pub(super) fn running_schedules(&self, runner: &Runner) -> Vec<(String, ZonedSchedule)> {
        let Some(deployment) = self.deployments.get(&runner.deployment_id) else {
            return Vec::new();
        };
        deployment
            .jobs
            .iter()
            .filter_map(|(verb, id)| {
                let job = self.jobs.get(id)?;
                (job.spec.on != RunOn::EveryReplica)
                    .then(|| (verb.clone(), job.spec.schedule.clone()))
            })
            .collect()
    }

    /// The occurrences of `expected` that are overdue, each recorded as reported by the first call
    /// that finds it so.
    pub(super) fn overdue(&mut self, runner: &Runner, expected: &[Expected]) -> Vec<Overdue> {
        let Some(deployment) = self.deployments.get(&runner.deployment_id) else {
            return Vec::new();
        };
        let active = deployment.active;
        // Each expected occurrence with its row, paired before any is dropped: a verb the deployment
        // does not have is nothing, and shifts no other.
        let rows: Vec<(&Expected, i64)> = expected
            .iter()
            .filter_map(|e| Some((e, *deployment.jobs.get(&e.verb)?)))
            .collect();
        let mut found = Vec::new();
        for (expected, id) in rows {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let row = OverdueRow {
                active,
                paused: job.paused,
                start_time: job.start_time,
                succeeded_since: self
                    .history
                    .last_success(&job.module, &job.verb)
                    .is_some_and(|success| success >= expected.occurrence),
                succeeded_in_time: self.history.succeeded_by(
                    &job.module,
                    &job.verb,
                    expected.occurrence,
                    expected.by,
                ),
                notified_for: job.overdue_notified_for,
            };
            let outstanding = row.is_overdue(expected.occurrence);
            let notify = row.notifies(expected.occurrence);
            if notify {
                job.overdue_notified_for = Some(expected.occurrence);
            }
            if outstanding || notify {
                found.push(Overdue {
                    verb: expected.verb.clone(),
                    occurrence: expected.occurrence,
                    notify,
                    outstanding,
                });
            }
        }
        found
    }
}
