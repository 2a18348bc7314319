//! [`Store::overdue`](crate::store::Store::overdue) in memory: `rules::overdue`'s decision over the
//! rows, under the store's lock (docs/operations.md, "Overdue").

use super::tables::State;
use crate::store::rules::overdue::OverdueRow;
use crate::store::{Expected, Overdue, Runner};

impl State {
    /// The occurrences of `expected` that are overdue, each recorded as reported by the first call
    /// that finds it so.
    pub(super) fn overdue(&mut self, runner: &Runner, expected: &[Expected]) -> Vec<Overdue> {
        let Some(deployment) = self.deployments.get(&runner.deployment_id) else {
            return Vec::new();
        };
        let active = deployment.active;
        let ids: Vec<i64> = expected
            .iter()
            .filter_map(|e| deployment.jobs.get(&e.verb).copied())
            .collect();
        let mut found = Vec::new();
        for (expected, id) in expected.iter().zip(ids) {
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            let row = OverdueRow {
                active,
                paused: job.paused,
                start_time: job.start_time,
                last_success: self.history.last_success(&job.module, &job.verb),
                notified_for: job.overdue_notified_for,
            };
            if !row.is_overdue(expected.occurrence) {
                continue;
            }
            let notify = row.notifies(expected.occurrence);
            if notify && let Some(job) = self.jobs.get_mut(&id) {
                job.overdue_notified_for = Some(expected.occurrence);
            }
            found.push(Overdue {
                verb: expected.verb.clone(),
                occurrence: expected.occurrence,
                notify,
            });
        }
        found
    }
}
