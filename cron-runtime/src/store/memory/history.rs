//! The in-memory store's history: the runs it records, the last ones only (docs/runtime.md, "History
//! retention").

use std::collections::{BTreeMap, HashMap, VecDeque};
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
    /// The occurrences of the runs kept, by module, verb and instant, the database stores' unique key
    /// on runs: whether an occurrence ran is one look-up ([`History::has`]), and a verb's last success
    /// before an instant a walk back from that instant ([`History::previous_success`]), as the
    /// database stores read their key; neither is a scan of the history.
    occurrences: HashMap<Arc<str>, HashMap<Arc<str>, Verb>>,
}

/// What the history knows of one verb. Kept once the verb's runs have all been forgotten: the verbs a
/// store has run are few beside its runs, and a verb's entry made again for each run would cost an
/// allocation per run.
#[derive(Debug, Default)]
struct Verb {
    /// The occurrences kept, by instant.
    instants: BTreeMap<DateTime<Utc>, Kept>,
    /// The latest instant of the verb that succeeded, kept or not: a verb's last success outlives the
    /// limit on runs as it outlives retention in the database stores (docs/runtime.md, "What a handler
    /// knows").
    last_succeeded: Option<DateTime<Utc>>,
}

/// The runs kept of one occurrence: one, as the database stores' unique key on runs allows.
#[derive(Debug, Default)]
struct Kept {
    runs: u32,
    /// How many of them succeeded.
    succeeded: u32,
    /// When the first of them that succeeded ended.
    succeeded_at: Option<DateTime<Utc>>,
}

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
                self.forget(&forgotten);
            }
        } else if self.runs.len() == self.runs.capacity() {
            let grown = (self.runs.len() * 2).max(4).min(self.limit);
            self.runs.reserve_exact(grown - self.runs.len());
        }
        self.keep(&run);
        self.runs.push_back(run);
    }

    /// Counts `run` among the occurrences kept.
    fn keep(&mut self, run: &RunRecord) {
        // Looked up by name first: the names are cloned only for a module or verb not kept yet.
        let verbs = match self.occurrences.get_mut(&*run.module) {
            Some(verbs) => verbs,
            None => self.occurrences.entry(Arc::clone(&run.module)).or_default(),
        };
        let known = match verbs.get_mut(&*run.verb) {
            Some(known) => known,
            None => verbs.entry(Arc::clone(&run.verb)).or_default(),
        };
        let kept = known.instants.entry(run.scheduled_at).or_default();
        kept.runs += 1;
        if run.outcome == Some(Outcome::Succeeded) {
            kept.succeeded += 1;
            kept.succeeded_at = kept.succeeded_at.min(run.finished_at).or(run.finished_at);
            known.last_succeeded = known.last_succeeded.max(Some(run.scheduled_at));
        }
    }

    /// No longer counts `run`, forgotten, among the occurrences kept.
    fn forget(&mut self, run: &RunRecord) {
        let Some(verbs) = self.occurrences.get_mut(&*run.module) else {
            return;
        };
        let Some(known) = verbs.get_mut(&*run.verb) else {
            return;
        };
        let Some(kept) = known.instants.get_mut(&run.scheduled_at) else {
            return;
        };
        kept.runs -= 1;
        kept.succeeded -= u32::from(run.outcome == Some(Outcome::Succeeded));
        if kept.succeeded == 0 {
            kept.succeeded_at = None;
        }
        if kept.runs == 0 {
            known.instants.remove(&run.scheduled_at);
        }
    }

    /// What the history knows of `verb` of `module`.
    fn verb(&self, module: &str, verb: &str) -> Option<&Verb> {
        self.occurrences.get(module)?.get(verb)
    }

    /// The latest instant of `verb` of `module` that succeeded, scheduled strictly before `before`
    /// ([`Store::previous_success`](crate::store::Store::previous_success)): a walk back from `before`
    /// over the verb's occurrences kept, stopping at the first that succeeded, as the database stores
    /// walk their unique key, else the verb's latest success if it is before `before`, kept or not.
    /// Only finished runs are kept, and a run that succeeded is finished.
    pub(super) fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let known = self.verb(module, verb)?;
        let kept = known
            .instants
            .range(..before)
            .rev()
            .find(|(_, kept)| kept.succeeded > 0)
            .map(|(at, _)| *at);
        // The latest success, forgotten or not, is the answer when it is before `before`: every
        // success before `before` is then at or before it.
        kept.or(known.last_succeeded.filter(|at| *at < before))
    }

    /// The latest occurrence of `verb` of `module` that succeeded, kept or not.
    pub(super) fn last_success(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        self.verb(module, verb)?.last_succeeded
    }

    /// Whether a run kept of an occurrence of `verb` of `module` at or after `from` succeeded and
    /// ended by `by` (`rules::overdue::OverdueRow::succeeded_in_time`), as the SQL stores read their
    /// history.
    pub(super) fn succeeded_by(
        &self,
        module: &str,
        verb: &str,
        from: DateTime<Utc>,
        by: DateTime<Utc>,
    ) -> bool {
        self.verb(module, verb).is_some_and(|known| {
            known
                .instants
                .range(from..)
                .any(|(_, kept)| kept.succeeded_at.is_some_and(|at| at <= by))
        })
    }

    /// Whether a run kept is of the occurrence `at` of `verb` of `module`.
    pub(super) fn has(&self, module: &Arc<str>, verb: &Arc<str>, at: DateTime<Utc>) -> bool {
        self.verb(module, verb)
            .is_some_and(|known| known.instants.contains_key(&at))
    }
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
        assert_eq!(history.verb(&m, &v).map(|v| v.instants.len()), Some(2));
        // Forgotten whole, a verb keeps its entry (no allocation per run for a verb that runs once
        // between two others).
        let w: Arc<str> = Arc::from("m::w");
        history.record(RunRecord {
            verb: Arc::clone(&w),
            ..of(4, 4)
        });
        assert!(history.has(&m, &w, at(4)));
        history.record(of(5, 5));
        history.record(of(6, 6));
        assert!(!history.has(&m, &w, at(4)));
        assert_eq!(history.verb(&m, &w).map(|w| w.instants.len()), Some(0));
        assert_eq!(history.occurrences[&m].len(), 2);
    }

    #[test]
    fn the_previous_success_is_the_latest_kept_success_strictly_before() {
        let mut history = History::default();
        history.set_limit(4);
        let at = |s| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
        let of = |run_id, s, outcome| RunRecord {
            scheduled_at: at(s),
            outcome: Some(outcome),
            ..run(run_id)
        };
        history.record(of(1, 10, Outcome::Succeeded));
        history.record(of(2, 20, Outcome::Succeeded));
        history.record(of(3, 30, Outcome::Failed));
        history.record(of(4, 40, Outcome::Skipped));
        assert_eq!(history.previous_success("m", "m::v", at(10)), None);
        assert_eq!(history.previous_success("m", "m::v", at(11)), Some(at(10)));
        assert_eq!(history.previous_success("m", "m::v", at(50)), Some(at(20)));
        assert_eq!(history.previous_success("m", "m::w", at(50)), None);
        assert_eq!(history.previous_success("n", "m::v", at(50)), None);
        // A later run recorded first (a backfill of an older instant after it) changes nothing.
        history.record(of(5, 5, Outcome::Succeeded));
        assert_eq!(history.previous_success("m", "m::v", at(50)), Some(at(20)));
        // Forgotten beyond the limit: 00:10, 00:20, then 00:05 are no longer kept.
        history.record(of(6, 60, Outcome::Failed));
        history.record(of(7, 70, Outcome::Failed));
        assert_eq!(history.previous_success("m", "m::v", at(80)), Some(at(5)));
        history.record(of(8, 80, Outcome::Failed));
        history.record(of(9, 90, Outcome::Failed));
        // No success kept: the verb's latest, 00:20, outlives the limit.
        assert_eq!(history.previous_success("m", "m::v", at(100)), Some(at(20)));
    }
}
