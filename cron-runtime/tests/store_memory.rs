//! The store conformance suite (tests/conformance) against the in-memory store, on tokio's paused clock:
//! the cases' waits take no time and their instants are exact.

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, StoreError, StoreSettings};

use conformance::{RunView, StoreUnderTest};

mod conformance;
mod support;

/// One in-memory store, shared by the replicas of a case.
struct Memory {
    store: MemoryStore,
}

impl Memory {
    /// A store whose clock starts a quarter of a second past a whole second, as any clock may.
    fn new() -> Memory {
        let origin = Utc.with_ymd_and_hms(2026, 3, 10, 10, 20, 30).unwrap()
            + chrono::TimeDelta::milliseconds(250);
        Memory {
            store: MemoryStore::starting_at(origin),
        }
    }
}

impl StoreUnderTest for Memory {
    type Store = MemoryStore;

    const HEARTBEAT_HINTS: bool = false;

    fn with_settings(&self, settings: StoreSettings) -> Result<MemoryStore, StoreError> {
        self.store.clone().with_settings(settings)
    }

    async fn now(&self) -> DateTime<Utc> {
        self.store.now()
    }

    async fn runs(&self) -> Vec<RunView> {
        let mut runs: Vec<RunView> = self
            .store
            .runs()
            .into_iter()
            .map(|run| RunView {
                run_id: run.run_id,
                verb: run.verb.to_string(),
                scheduled_at: run.scheduled_at,
                claimed_at: Some(run.claimed_at),
                started_at: run.started_at,
                finished_at: run.finished_at,
                outcome: run.outcome,
                error: run.error,
                runner: run.runner.to_string(),
                skipped: run.skipped,
                attempts: run.attempts,
                manual: run.manual,
                backfill: run.backfill,
            })
            .collect();
        runs.sort_by_key(|run| run.run_id);
        runs
    }

    async fn next_execution(&self, module: &str, verb: &str) -> Option<DateTime<Utc>> {
        self.store.next_execution(module, verb)
    }

    type Operator = MemoryStore;

    fn operator(&self) -> MemoryStore {
        self.store.clone()
    }
}

/// The in-memory store's operator: its own methods, the rules the operator API keeps on the others.
impl conformance::Operator for MemoryStore {
    async fn trigger(&self, verb: &str) -> Result<DateTime<Utc>, String> {
        MemoryStore::trigger(self, conformance::MODULE, verb).map_err(|e| e.to_string())
    }

    async fn pause(&self, verb: &str) {
        MemoryStore::pause(self, conformance::MODULE, verb).unwrap();
    }

    async fn backfill(
        &self,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, String> {
        MemoryStore::backfill(self, conformance::MODULE, verb, from, to, false)
            .map_err(|e| e.to_string())
    }

    async fn cancel_backfill(&self, verb: &str) -> u64 {
        MemoryStore::cancel_backfill(self, conformance::MODULE, verb).unwrap()
    }

    async fn cancel(&self, verb: &str, by: &str, note: Option<&str>) -> Result<i64, String> {
        MemoryStore::cancel(self, conformance::MODULE, verb, by, note).map_err(|e| e.to_string())
    }

    /// No audit trail in memory.
    async fn audited(&self, _action: &str) -> Option<usize> {
        None
    }

    async fn reschedule(&self, verb: &str, expression: &str) -> Result<(), String> {
        MemoryStore::reschedule(self, conformance::MODULE, verb, expression, None)
            .map_err(|e| e.to_string())
    }

    async fn reset_schedule(&self, verb: &str) {
        MemoryStore::reset_schedule(self, conformance::MODULE, verb).unwrap();
    }

    /// The store reports nothing: its row's next occurrence, as `cronverb resume` reports the row's.
    async fn resume(&self, verb: &str) -> Option<DateTime<Utc>> {
        MemoryStore::resume(self, conformance::MODULE, verb).unwrap();
        self.next_execution(conformance::MODULE, verb)
    }
}

macro_rules! memory_case {
    // A case this store fails (a divergence) gets an arm of its own with `#[ignore = "divergence: …"]`
    // until its store is fixed (docs/runtime.md, "The store seam"). None now.
    ($case:ident) => {
        #[tokio::test(start_paused = true)]
        async fn $case() {
            conformance::$case(Memory::new()).await;
        }
    };
}

conformance::every_case!(memory_case);
