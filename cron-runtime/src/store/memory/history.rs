//! The in-memory store's history: the runs it records, the last ones only (docs/runtime.md, "History
//! retention").

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::defaults::DEFAULT_HISTORY_LIMIT;
use crate::store::{Attempt, Outcome};

/// One run, as the in-memory store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRecord {
    /// The run's id, unique in the store.
    pub run_id: i64,
    /// The job (a verb of one deployment) the run is an occurrence of.
    pub job_id: i64,
    /// The deployment whose job ran.
    pub deployment_id: i64,
    /// Shared with the job's other runs: thousands of runs a second cost no copies of their names.
    pub module: Arc<str>,
    /// The verb (`billing::send_invoices`), shared with the job's other runs.
    pub verb: Arc<str>,
    /// The occurrence this run is.
    pub scheduled_at: DateTime<Utc>,
    /// When the run was claimed, on the store's clock.
    pub claimed_at: DateTime<Utc>,
    /// When the handler was first polled, as the executor measured it (docs/operations.md, "The
    /// tables"). While the run is in flight, and for a run abandoned or cancelled by shutdown, the
    /// planned start: the later of the claim and the scheduled instant. `None` for a run recorded
    /// `skipped`, or whose handler was never called.
    pub started_at: Option<DateTime<Utc>>,
    /// `None` while the run is executing.
    pub finished_at: Option<DateTime<Utc>>,
    /// `None` while the run is executing.
    pub outcome: Option<Outcome>,
    /// The error or panic message of a run that did not succeed.
    pub error: Option<String>,
    /// The runner's name (`host:pid`).
    pub runner: Arc<str>,
    /// See [`Finished::Recorded`](crate::store::Finished::Recorded).
    pub skipped: u32,
    /// The attempts of an occurrence tried more than once, in order (docs/runtime.md, "Retries"): the
    /// ones ended so far, the last one included once the occurrence has ended. Empty for an occurrence
    /// that ended at its first attempt. While a retry waits, the run has no outcome.
    pub attempts: Vec<Attempt>,
    /// A manual run (asked for with [`MemoryStore::trigger`](super::MemoryStore::trigger)), scheduled
    /// at the trigger's instant.
    pub manual: bool,
    /// A run of a backfilled occurrence ([`MemoryStore::backfill`](super::MemoryStore::backfill)), a
    /// manual run of its own instant (docs/operations.md, "Backfill").
    pub backfill: bool,
}

/// The finished runs the store keeps, oldest first.
#[derive(Debug)]
pub(super) struct History {
    limit: usize,
    runs: VecDeque<RunRecord>,
    /// The occurrences of the runs kept, by module, verb and instant (how many runs of each: one, as
    /// the database stores' unique key on runs allows): whether an occurrence ran is one look-up,
    /// not a scan of the history ([`History::has`]).
    occurrences: HashMap<Occurrence, u32>,
}

/// A run's occurrence: its module, verb and instant, the database stores' unique key on runs.
type Occurrence = (Arc<str>, Arc<str>, DateTime<Utc>);

impl Default for History {
    fn default() -> Self {
        History {
            limit: DEFAULT_HISTORY_LIMIT,
            runs: VecDeque::new(),
            occurrences: HashMap::new(),
        }
    }
}

impl History {
    /// Keeps the last `limit` runs (at least one) from now on.
    pub(super) fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    /// The finished runs kept, in the order they finished.
    pub(super) fn finished(&self) -> impl Iterator<Item = &RunRecord> {
        self.runs.iter()
    }

    /// Adds a finished run, forgetting the oldest one beyond the limit.
    ///
    /// The queue grows by doubling, but never past the limit: doubled at 8,192 runs of a 10,000 limit it
    /// would hold room for 16,384 (docs/benchmarks.md, "Where the memory went").
    pub(super) fn record(&mut self, run: RunRecord) {
        if self.runs.len() >= self.limit {
            if let Some(forgotten) = self.runs.pop_front() {
                let key = occurrence(&forgotten);
                if let Some(count) = self.occurrences.get_mut(&key) {
                    *count -= 1;
                    if *count == 0 {
                        self.occurrences.remove(&key);
                    }
                }
            }
        } else if self.runs.len() == self.runs.capacity() {
            let grown = (self.runs.len() * 2).max(4).min(self.limit);
            self.runs.reserve_exact(grown - self.runs.len());
        }
        *self.occurrences.entry(occurrence(&run)).or_default() += 1;
        self.runs.push_back(run);
    }

    /// The latest instant among the runs kept of `verb` of `module` that succeeded, scheduled strictly
    /// before `before` ([`Store::previous_success`](crate::store::Store::previous_success)): a walk of
    /// the runs kept (at most the limit), only when a handler asks. Only finished runs are kept, and a
    /// run that succeeded is finished.
    pub(super) fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        self.runs
            .iter()
            .filter(|run| {
                run.outcome == Some(Outcome::Succeeded)
                    && run.scheduled_at < before
                    && *run.verb == *verb
                    && *run.module == *module
            })
            .map(|run| run.scheduled_at)
            .max()
    }

    /// Whether a run kept is of the occurrence `at` of `verb` of `module`.
    pub(super) fn has(&self, module: &Arc<str>, verb: &Arc<str>, at: DateTime<Utc>) -> bool {
        self.occurrences
            .contains_key(&(Arc::clone(module), Arc::clone(verb), at))
    }
}

fn occurrence(run: &RunRecord) -> Occurrence {
    (
        Arc::clone(&run.module),
        Arc::clone(&run.verb),
        run.scheduled_at,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run_id: i64) -> RunRecord {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        RunRecord {
            run_id,
            job_id: 1,
            deployment_id: 1,
            module: Arc::from("m"),
            verb: Arc::from("m::v"),
            scheduled_at: at,
            claimed_at: at,
            started_at: Some(at),
            finished_at: Some(at),
            outcome: Some(Outcome::Succeeded),
            error: None,
            runner: Arc::from("host:1"),
            skipped: 0,
            attempts: Vec::new(),
            manual: false,
            backfill: false,
        }
    }

    #[test]
    fn keeps_the_last_runs_in_room_for_no_more_than_the_limit() {
        let mut history = History::default();
        history.set_limit(10);
        for run_id in 1..=25 {
            history.record(run(run_id));
            assert!(
                history.runs.capacity() <= 10,
                "room for {}",
                history.runs.capacity()
            );
        }
        let kept: Vec<i64> = history.finished().map(|r| r.run_id).collect();
        assert_eq!(kept, (16..=25).collect::<Vec<_>>());
    }

    #[test]
    fn knows_the_occurrences_of_the_runs_it_keeps() {
        let mut history = History::default();
        history.set_limit(2);
        let at = |s| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
        let of = |run_id, s| RunRecord {
            scheduled_at: at(s),
            ..run(run_id)
        };
        let (m, v) = (Arc::from("m"), Arc::from("m::v"));
        history.record(of(1, 1));
        history.record(of(2, 2));
        assert!(history.has(&m, &v, at(1)) && history.has(&m, &v, at(2)));
        assert!(!history.has(&m, &Arc::from("m::w"), at(1)));
        // The oldest run forgotten, its occurrence is too.
        history.record(of(3, 3));
        assert!(!history.has(&m, &v, at(1)));
        assert!(history.has(&m, &v, at(2)) && history.has(&m, &v, at(3)));
        assert_eq!(history.occurrences.len(), 2);
    }
}
