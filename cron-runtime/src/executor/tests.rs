//! The executor run whole on the in-memory store, with a fault where a test needs one.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::watch;

use super::{Start, run};
use crate::error::RuntimeError;
use crate::health::Vitals;
use crate::store::{
    Beat, Change, Claimed, DeploymentSpec, Finish, Finishing, MemoryStore, Outcome, ReplicaRun,
    Runner, Store, StoreError,
};
use crate::{JobOptions, Runtime};

/// The in-memory store with one fault: no lease can be renewed (what a replica sees when it is
/// frozen or cut off from the store while the others go on), or recording how a run ended takes
/// 1.5 s (a busy store); or none, claiming with the finishes as PostgreSQL does (the memory store
/// does not). Counts the runs [`Store::claim_due`] claimed, and keeps the ids of the runs sent for
/// renewal. While `full` is set, every write fails as on a full disk.
#[derive(Clone)]
struct Faulty {
    store: MemoryStore,
    fault: Fault,
    claimed: Arc<AtomicU32>,
    /// How many times [`Store::claim_due`] was called.
    calls: Arc<AtomicU32>,
    renewed: Arc<Mutex<Vec<i64>>>,
    full: Arc<AtomicBool>,
    /// Set once [`Store::drain`] was called.
    drained: Arc<AtomicBool>,
    /// Set once [`Store::drain`] returned.
    drain_ended: Arc<AtomicBool>,
    /// When [`Store::prune_history`] was called, on tokio's clock.
    prunes: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    Chaining,
    /// Saying that the replica drains takes this long (a store slow to answer, or away).
    SlowDrain(Duration),
    /// None: the memory store as it is, which claims nothing with the finishes.
    Plain,
    NoRenewals,
    SlowRecords,
    /// The retention finds this many calls' worth of runs to prune: each of the first this many calls
    /// of [`Store::prune_history`] deletes as many as a call may, the next ones a few.
    Backlog(u32),
}

impl Faulty {
    /// The error of a write while `full` is set.
    fn refused(&self) -> Result<(), StoreError> {
        if self.full.load(Ordering::SeqCst) {
            return Err(StoreError::Database {
                context: "writing".to_owned(),
                source: "database or disk is full".into(),
            });
        }
        Ok(())
    }

    async fn record(&self) {
        if self.fault == Fault::SlowRecords {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
        }
    }
}

impl crate::store::sealed::Sealed for Faulty {}

impl Store for Faulty {
    async fn register(&self, spec: &DeploymentSpec) -> Result<Runner, StoreError> {
        self.store.register(spec).await
    }
    async fn heartbeat(&self, runner: &Runner) -> Result<Beat, StoreError> {
        self.refused()?;
        self.store.heartbeat(runner).await
    }
    async fn claim_due(
        &self,
        runner: &Runner,
        ahead: Duration,
        limit: usize,
    ) -> Result<Claimed, StoreError> {
        self.refused()?;
        self.calls.fetch_add(1, Ordering::SeqCst);
        let claimed = self.store.claim_due(runner, ahead, limit).await?;
        let runs = u32::try_from(claimed.claims.len()).unwrap_or(u32::MAX);
        self.claimed.fetch_add(runs, Ordering::SeqCst);
        Ok(claimed)
    }
    async fn renew(&self, runner: &Runner, run_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        if self.fault == Fault::NoRenewals {
            return Err(StoreError::Invalid("the store is out of reach".to_owned()));
        }
        self.renewed.lock().unwrap().extend_from_slice(run_ids);
        self.store.renew(runner, run_ids).await
    }
    async fn cancels(&self, run_ids: &[i64]) -> Result<Vec<crate::store::Cancel>, StoreError> {
        self.store.cancels(run_ids).await
    }
    async fn finish(
        &self,
        runner: &Runner,
        finishes: &[Finish],
        chain: Option<Duration>,
    ) -> Finishing {
        self.record().await;
        if let Err(error) = self.refused() {
            let message = error.to_string();
            let results = finishes
                .iter()
                .map(|_| {
                    Err(StoreError::Database {
                        context: "recording how runs ended".to_owned(),
                        source: message.clone().into(),
                    })
                })
                .collect();
            return Finishing {
                results,
                claimed: None,
            };
        }
        let results = self.store.finish(runner, finishes, None).await.results;
        let Some(ahead) = chain.filter(|_| self.fault == Fault::Chaining) else {
            return Finishing {
                results,
                claimed: None,
            };
        };
        // What is due within the horizon, claimed with the finishes (in these tests, the next
        // occurrences of the jobs that ended), not counted as a claim by `claim_due`.
        let claimed = self
            .store
            .claim_due(runner, ahead, usize::MAX)
            .await
            .ok()
            .filter(|claimed| !claimed.claims.is_empty())
            .map(|claimed| Claimed {
                next_due: None,
                ..claimed
            });
        Finishing { results, claimed }
    }
    async fn give_back(&self, runner: &Runner, run_ids: &[i64]) -> Result<(), StoreError> {
        self.store.give_back(runner, run_ids).await
    }
    async fn previous_success(
        &self,
        module: &str,
        verb: &str,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        self.store.previous_success(module, verb, before).await
    }
    async fn drain(&self, runner: &Runner) -> Result<(), StoreError> {
        self.drained.store(true, Ordering::SeqCst);
        if let Fault::SlowDrain(took) = self.fault {
            tokio::time::sleep(took).await;
        }
        let drained = self.store.drain(runner).await;
        self.drain_ended.store(true, Ordering::SeqCst);
        drained
    }
    async fn deregister(&self, runner: &Runner, cancelled: &[i64]) -> Result<(), StoreError> {
        self.store.deregister(runner, cancelled).await
    }
    async fn every_replica(
        &self,
        runner: &Runner,
        last_runs: Option<&[ReplicaRun]>,
    ) -> Result<Vec<String>, StoreError> {
        self.store.every_replica(runner, last_runs).await
    }

    async fn changed(&self) -> Change {
        self.store.changed().await
    }

    async fn running_schedules(
        &self,
        runner: &Runner,
    ) -> Result<Vec<(String, cron_schema::ZonedSchedule)>, StoreError> {
        self.store.running_schedules(runner).await
    }

    async fn overdue(
        &self,
        runner: &Runner,
        expected: &[crate::store::Expected],
    ) -> Result<Vec<crate::store::Overdue>, StoreError> {
        self.store.overdue(runner, expected).await
    }

    async fn prune_history(&self, older_than: Duration) -> Result<u64, StoreError> {
        let calls = {
            let mut prunes = self.prunes.lock().unwrap();
            prunes.push(tokio::time::Instant::now());
            prunes.len()
        };
        match self.fault {
            Fault::Backlog(full) if calls <= full as usize => Ok(crate::store::RETENTION_CALL_RUNS),
            Fault::Backlog(_) => Ok(3),
            _ => self.store.prune_history(older_than).await,
        }
    }
}

/// The executor of `runtime`, running on its memory store with a fault.
struct Running {
    store: MemoryStore,
    /// How many runs [`Store::claim_due`] claimed.
    claimed: Arc<AtomicU32>,
    /// How many times [`Store::claim_due`] was called.
    calls: Arc<AtomicU32>,
    /// The runs sent for renewal, once per renewal.
    renewed: Arc<Mutex<Vec<i64>>>,
    /// Set, every write fails.
    full: Arc<AtomicBool>,
    /// Set once the executor said it drains ([`Store::drain`]).
    drained: Arc<AtomicBool>,
    /// Set once the store heard it ([`Store::drain`] returned).
    drain_ended: Arc<AtomicBool>,
    /// When the retention called [`Store::prune_history`].
    prunes: Arc<Mutex<Vec<tokio::time::Instant>>>,
    vitals: Arc<Vitals>,
    stop: watch::Sender<bool>,
    executor: tokio::task::JoinHandle<Result<(), RuntimeError>>,
}

impl Running {
    async fn stop(self) -> MemoryStore {
        self.stop.send(true).unwrap();
        self.executor.await.unwrap().unwrap();
        self.store
    }
}

/// Runs the executor of `runtime` on its memory store with `fault`.
fn run_faulty(runtime: Runtime, fault: Fault) -> Running {
    let (store, plan) = runtime.into_memory_parts();
    let (stop, shutdown) = watch::channel(false);
    let claimed = Arc::new(AtomicU32::new(0));
    let calls = Arc::new(AtomicU32::new(0));
    let renewed = Arc::new(Mutex::new(Vec::new()));
    let full = Arc::new(AtomicBool::new(false));
    let drained = Arc::new(AtomicBool::new(false));
    let drain_ended = Arc::new(AtomicBool::new(false));
    let prunes = Arc::new(Mutex::new(Vec::new()));
    let vitals = Vitals::new();
    let faulty = Faulty {
        store: store.clone(),
        fault,
        claimed: Arc::clone(&claimed),
        calls: Arc::clone(&calls),
        renewed: Arc::clone(&renewed),
        full: Arc::clone(&full),
        drained: Arc::clone(&drained),
        drain_ended: Arc::clone(&drain_ended),
        prunes: Arc::clone(&prunes),
    };
    Running {
        store,
        claimed,
        calls,
        renewed,
        full,
        drained,
        drain_ended,
        prunes,
        vitals: Arc::clone(&vitals),
        stop,
        executor: tokio::spawn(run(
            faulty,
            Start {
                plan,
                shutdown,
                vitals,
            },
        )),
    }
}

/// The scheduled instants of the store's runs, in seconds after `origin`.
fn seconds(store: &MemoryStore, origin: DateTime<Utc>) -> Vec<i64> {
    store
        .runs()
        .iter()
        .map(|r| (r.scheduled_at - origin).num_seconds())
        .collect()
}

/// Starts an executor of module `test` from 2026-01-01T00:00:00Z, the origin returned, on a store that
/// claims with the finishes, with the jobs `configure` adds.
async fn from_origin(
    configure: impl FnOnce(crate::RuntimeBuilder) -> crate::RuntimeBuilder,
) -> (DateTime<Utc>, Running) {
    every_second_with(Fault::Chaining, configure).await
}

/// [`every_second`] on a store with `fault`.
async fn every_second_with(
    fault: Fault,
    configure: impl FnOnce(crate::RuntimeBuilder) -> crate::RuntimeBuilder,
) -> (DateTime<Utc>, Running) {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let builder = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(MemoryStore::starting_at(origin));
    let runtime = configure(builder).build().await.unwrap();
    (origin, run_faulty(runtime, fault))
}

/// [`from_origin`], with a job `test::tick` due every second besides whatever `configure` adds.
async fn every_second(
    configure: impl FnOnce(crate::RuntimeBuilder) -> crate::RuntimeBuilder,
) -> (DateTime<Utc>, Running) {
    from_origin(|builder| configure(builder.job("test::tick", "* * * * * *", || async {}))).await
}

#[tokio::test(start_paused = true)]
async fn a_job_due_every_second_is_claimed_by_the_finish_of_its_last_run() {
    let (origin, running) = every_second(|builder| builder).await;
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    let claimed = running.claimed.load(Ordering::SeqCst);
    let store = running.stop().await;

    // Each run's finish claimed the next occurrence: only the first came from a claim, and every
    // occurrence ran once, at its instant, skipping none.
    let runs = store.runs();
    let seconds: Vec<(i64, Option<Outcome>, u32)> = runs
        .iter()
        .map(|r| {
            (
                (r.scheduled_at - origin).num_seconds(),
                r.outcome,
                r.skipped,
            )
        })
        .collect();
    let expected: Vec<_> = (1..=10).map(|s| (s, Some(Outcome::Succeeded), 0)).collect();
    assert_eq!(seconds, expected, "{runs:?}");
    assert!(runs.iter().all(|r| r.started_at == Some(r.scheduled_at)));
    assert_eq!(claimed, 1, "claims by `claim_due`");
}

#[tokio::test(start_paused = true)]
async fn a_renewal_leaves_out_the_runs_claimed_a_moment_ago() {
    let (_, running) = every_second(|builder| {
        builder.job_with(
            "test::long",
            "0 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(600)),
            || tokio::time::sleep(Duration::from_secs(70)),
        )
    })
    .await;
    tokio::time::sleep(Duration::from_millis(140_500)).await;
    let renewed = running.renewed.lock().unwrap().clone();
    let store = running.stop().await;

    // The long run (60 s to 130 s) outlived its claim's 30 s lease through renewals, one every
    // 10 s from the first that found less than 28 s left; the every-second runs, each claimed a
    // second before it ran and over at once, were never sent: their claims' leases outlasted them.
    let runs = store.runs();
    let long = runs.iter().find(|r| &*r.verb == "test::long").unwrap();
    assert_eq!(long.outcome, Some(Outcome::Succeeded), "{long:?}");
    assert!(renewed.iter().all(|id| *id == long.run_id), "{renewed:?}");
    assert!((6..=8).contains(&renewed.len()), "{renewed:?}");
    let ticks = runs.iter().filter(|r| &*r.verb == "test::tick");
    assert!(ticks.clone().all(|r| r.outcome == Some(Outcome::Succeeded)));
    assert_eq!(ticks.count(), 140);
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_back_runs_claimed_ahead_without_waiting_for_the_grace_period() {
    let (origin, running) = every_second(|builder| {
        builder
            .shutdown_grace(Duration::from_secs(10))
            .job("test::slow", "5 * * * * *", || {
                tokio::time::sleep(Duration::from_secs(30))
            })
    })
    .await;
    // At 5.2 s the slow run is in flight, and the tick's run of 6 s was claimed by the end of the
    // run of 5 s.
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let store = running.store.clone();
    let drained = Arc::clone(&running.drained);
    assert!(!drained.load(Ordering::SeqCst));
    let stopping = tokio::spawn(running.stop());
    // While shutdown waits for the slow run, the tick's occurrence of 6 s is back in the store,
    // for another replica to run now, and this replica's row says it drains: the others own its
    // share from now on (docs/runtime.md, "How work is spread").
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        drained.load(Ordering::SeqCst),
        "shutdown did not say this replica drains"
    );
    assert_eq!(
        store.next_execution("test", "test::tick"),
        Some(origin + chrono::TimeDelta::seconds(6))
    );
    assert!(
        store
            .runs()
            .iter()
            .all(|r| r.scheduled_at < origin + chrono::TimeDelta::seconds(6))
    );
    stopping.await.unwrap();
    let slow: Vec<_> = store
        .runs()
        .into_iter()
        .filter(|r| &*r.verb == "test::slow")
        .collect();
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].outcome, Some(Outcome::Cancelled));
}

/// Shuts down a replica of a job due every second whose store takes `took` to hear that it drains;
/// how long shutdown took, and whether the store had heard it by then.
async fn shutdown_with_a_drain_taking(took: Duration) -> (Duration, bool) {
    let (_, running) = every_second_with(Fault::SlowDrain(took), |builder| builder).await;
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let drain_ended = Arc::clone(&running.drain_ended);
    let began = tokio::time::Instant::now();
    running.stop().await;
    (began.elapsed(), drain_ended.load(Ordering::SeqCst))
}

#[tokio::test(start_paused = true)]
async fn shutdown_returns_once_the_store_heard_that_the_replica_drains_or_after_a_while() {
    // Nothing is going on: the runs wind down at once, and shutdown waits for the store to hear
    // that this replica drains, so that a process that exits then has said it (docs/runtime.md,
    // "How work is spread").
    let (took, heard) = shutdown_with_a_drain_taking(Duration::from_secs(2)).await;
    assert!(heard, "shutdown returned before the store heard the drain");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    // A store that does not answer holds shutdown up for a while at most.
    let (took, heard) = shutdown_with_a_drain_taking(Duration::from_secs(3_600)).await;
    assert!(!heard);
    assert!(
        took >= super::shutdown::DRAIN_WAIT && took < super::shutdown::DRAIN_WAIT * 2,
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_back_the_occurrence_a_finish_claimed() {
    let (origin, running) = every_second(|builder| builder).await;
    // The run of 5 s ended at 5 s and claimed the occurrence of 6 s (the claim-ahead alone would
    // claim it at 5.5 s).
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    assert_eq!(seconds(&running.store, origin), [1, 2, 3, 4, 5, 6]);
    let store = running.stop().await;
    assert_eq!(
        seconds(&store, origin),
        [1, 2, 3, 4, 5],
        "released, not recorded"
    );
    assert_eq!(
        store.next_execution("test", "test::tick"),
        Some(origin + chrono::TimeDelta::seconds(6))
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_recorded_late_ends_when_its_handler_ended() {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let store = MemoryStore::starting_at(origin);
    let runtime = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store)
        .job("test::quick", "* * * * * *", || async {})
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::SlowRecords);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let store = running.stop().await;

    // Each handler returns at once, but its end reaches the store 1.5 s later, after the next
    // occurrence: that occurrence was not overlapped, so it runs (late) and the run before it
    // skipped nothing. The run of 1 s is recorded at 2.5 s and the job's next occurrence is 2 s,
    // which starts at once, at 2.5 s; recorded at 4 s, its next is 3 s, which starts at 4 s, on
    // the occurrence of 4 s, which it overlaps. Ending runs when they were recorded would give
    // 1, 3, 5, 7, each skipping one.
    let runs: Vec<_> = store
        .runs()
        .into_iter()
        .filter(|r| r.outcome == Some(Outcome::Succeeded))
        .collect();
    let seconds: Vec<(i64, u32)> = runs
        .iter()
        .map(|r| ((r.scheduled_at - origin).num_seconds(), r.skipped))
        .collect();
    assert_eq!(seconds[..3], [(1, 0), (2, 0), (3, 1)], "{runs:?}");
}

#[tokio::test(start_paused = true)]
async fn a_handler_is_not_polled_past_its_lease_when_renewals_fail() {
    let steps = Arc::new(AtomicU32::new(0));
    let store = MemoryStore::starting_at(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    let runtime = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store)
        .lease(Duration::from_secs(3))
        .job_with(
            "test::long",
            "0 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(60)),
            {
                let steps = Arc::clone(&steps);
                move || {
                    let steps = Arc::clone(&steps);
                    async move {
                        // One step every 100 ms for 20 s, far past the 3 s lease.
                        for _ in 0..200 {
                            steps.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            },
        )
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::NoRenewals);

    // The run starts at second 60 and its lease lasts 3 s from the claim (made up to a second
    // ahead), less a 300 ms margin: the handler takes a step every 100 ms from 60.0 s and stops
    // between 61.7 s and 62.7 s. Unguarded, it would have taken 100 steps by 70 s.
    tokio::time::sleep(Duration::from_secs(70)).await;
    let taken = steps.load(Ordering::SeqCst);
    assert!((17..=27).contains(&taken), "{taken} steps");
    let runs = running.store.runs();
    let first = runs.first().expect("the run was claimed");
    assert_eq!(
        first.scheduled_at,
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 0).unwrap()
    );
    assert_eq!(
        first.outcome,
        Some(Outcome::Abandoned),
        "its lease ran out, so a heartbeat took it back: {runs:?}"
    );
    running.stop().await;
}

/// What a capped replica's handlers saw: at each start, the runs this (only) replica held in the
/// store, claimed or executing, and the most handlers executing at once.
#[derive(Clone, Default)]
struct Held {
    /// The runs held in the store at each handler's start, the starting one included.
    at_starts: Arc<Mutex<Vec<usize>>>,
    executing: Arc<AtomicU32>,
    most_executing: Arc<AtomicU32>,
}

impl Held {
    /// A handler that records what it sees at its start, then runs for `lasts`.
    fn handler(
        &self,
        store: &MemoryStore,
        lasts: Duration,
    ) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync + 'static
    {
        let held = self.clone();
        let store = store.clone();
        move || {
            let held = held.clone();
            let store = store.clone();
            Box::pin(async move {
                let in_store = store.runs().iter().filter(|r| r.outcome.is_none()).count();
                held.at_starts.lock().unwrap().push(in_store);
                let now = held.executing.fetch_add(1, Ordering::SeqCst) + 1;
                held.most_executing.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(lasts).await;
                held.executing.fetch_sub(1, Ordering::SeqCst);
            })
        }
    }

    fn most_held(&self) -> usize {
        self.at_starts
            .lock()
            .unwrap()
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

#[tokio::test(start_paused = true)]
async fn a_capped_replica_holds_at_most_its_cap_and_claims_again_as_each_slot_frees() {
    // Only the claim loop claims: each recorded run wakes it at once.
    let claimed = ten_heavy_jobs_under_a_cap_of_three(Fault::Plain).await;
    assert_eq!(
        claimed, 10,
        "every run claimed by `claim_due`, as slots freed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_capped_replica_holds_at_most_its_cap_when_finishes_claim_too() {
    // The store claims with the finishes everything due: the finishes took the rest as slots freed,
    // never all at once.
    let claimed = ten_heavy_jobs_under_a_cap_of_three(Fault::Chaining).await;
    assert!(claimed < 10, "claims by `claim_due`: {claimed}");
}

/// Ten jobs of 5 s due at 60 s on a replica capped at three, on a store with `fault`: never more than
/// three held, and three at a time until all ten ran, each slot taken again as soon as it freed.
/// Returns how many runs [`Store::claim_due`] claimed.
async fn ten_heavy_jobs_under_a_cap_of_three(fault: Fault) -> u32 {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let store = MemoryStore::starting_at(origin);
    let held = Held::default();
    let mut builder = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store.clone())
        .max_concurrent_runs(3);
    // Ten jobs of 5 s each, all due at 60 s.
    for job in 0..10 {
        builder = builder.job(
            format!("test::heavy_{job}"),
            "0 * * * * *",
            held.handler(&store, Duration::from_secs(5)),
        );
    }
    let running = run_faulty(builder.build().await.unwrap(), fault);
    // 60 s, then four rounds of at most three runs of 5 s: over by 80 s, before the next minute.
    tokio::time::sleep(Duration::from_secs(85)).await;
    let claimed = running.claimed.load(Ordering::SeqCst);
    let store = running.stop().await;

    let runs = store.runs();
    assert_eq!(runs.len(), 10, "{runs:?}");
    assert!(
        runs.iter()
            .all(|r| r.outcome == Some(Outcome::Succeeded) && r.skipped == 0),
        "{runs:?}"
    );
    assert!(
        runs.iter()
            .all(|r| (r.scheduled_at - origin).num_seconds() == 60)
    );
    // Never more than three held, and three at once while runs waited.
    assert_eq!(held.at_starts.lock().unwrap().len(), 10);
    assert_eq!(held.most_held(), 3, "{:?}", held.at_starts.lock().unwrap());
    assert_eq!(held.most_executing.load(Ordering::SeqCst), 3);
    // Each slot was taken again as soon as a run was recorded: the last runs started at 75 s, after
    // three rounds of 5 s, not at a later tick.
    let started: Vec<i64> = runs
        .iter()
        .map(|r| (r.started_at.unwrap() - origin).num_seconds())
        .collect();
    assert_eq!(
        started.iter().filter(|&&s| s == 60).count(),
        3,
        "{started:?}"
    );
    assert_eq!(started.iter().max(), Some(&75), "{started:?}");
    claimed
}

/// One slot, two jobs of 5 s due at 60 s, late 2 s after their instant: the second waits for the slot
/// until 65 s, late past the tolerance, and its job says to skip a late occurrence.
fn one_slot_two_skipping_jobs(store: &MemoryStore, held: &Held) -> crate::RuntimeBuilder {
    let skip = || JobOptions::new().missed(cron_schema::MissedPolicy::Skip);
    Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store.clone())
        .max_concurrent_runs(1)
        .missed_run_tolerance(Duration::from_secs(2))
        .job_with(
            "test::first",
            "0 * * * * *",
            skip(),
            held.handler(store, Duration::from_secs(5)),
        )
        .job_with(
            "test::second",
            "0 * * * * *",
            skip(),
            held.handler(store, Duration::from_secs(5)),
        )
}

#[tokio::test(start_paused = true)]
async fn a_run_that_waited_for_a_slot_is_late_and_follows_its_missed_policy() {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let store = MemoryStore::starting_at(origin);
    let held = Held::default();
    let runtime = one_slot_two_skipping_jobs(&store, &held)
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::Chaining);
    tokio::time::sleep(Duration::from_secs(70)).await;
    let store = running.stop().await;

    let records = store.runs();
    let runs: Vec<(&str, Option<Outcome>)> =
        records.iter().map(|r| (&*r.verb, r.outcome)).collect();
    assert_eq!(
        runs,
        [
            ("test::first", Some(Outcome::Succeeded)),
            ("test::second", Some(Outcome::Skipped)),
        ],
        "{records:?}"
    );
    assert_eq!(held.at_starts.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_finish_at_the_cap_claims_no_more_than_the_slots_it_frees() {
    let held = Held::default();
    // Three jobs due every second on a store that claims with the finishes everything due within the
    // horizon: more than the finishes of a capped replica free.
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let store = MemoryStore::starting_at(origin);
    let runtime = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(store.clone())
        .max_concurrent_runs(2);
    let runtime = ["test::tick", "test::a", "test::b"]
        .into_iter()
        .fold(runtime, |builder, verb| {
            builder.job(verb, "* * * * * *", held.handler(&store, Duration::ZERO))
        })
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::Chaining);
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    let claimed = running.claimed.load(Ordering::SeqCst);
    let store = running.stop().await;

    let runs = store.runs();
    assert!(
        held.most_held() <= 2,
        "{:?}",
        held.at_starts.lock().unwrap()
    );
    assert_eq!(held.most_held(), 2);
    // Every occurrence of the three jobs from 1 s to 10 s ran once, none skipped.
    for verb in ["test::tick", "test::a", "test::b"] {
        let seconds: Vec<(i64, Option<Outcome>, u32)> = runs
            .iter()
            .filter(|r| &*r.verb == verb)
            .map(|r| {
                (
                    (r.scheduled_at - origin).num_seconds(),
                    r.outcome,
                    r.skipped,
                )
            })
            .collect();
        let expected: Vec<_> = (1..=10).map(|s| (s, Some(Outcome::Succeeded), 0)).collect();
        assert_eq!(seconds, expected, "{verb}: {runs:?}");
    }
    // Finishes claimed some of the occurrences: chained claims were made, and kept within the cap.
    assert!(claimed < 30, "claims by `claim_due`: {claimed}");
}

/// Health while the store refuses every write (a full disk; docs/operations.md, "Health checks"): the
/// replica is not ready, yet live; ready again, and running, once a write succeeds.
#[tokio::test(start_paused = true)]
async fn a_replica_is_not_ready_while_its_store_refuses_writes() {
    let (origin, running) = every_second(|builder| builder).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(
        running.vitals.health().ready,
        "{:?}",
        running.vitals.health()
    );

    running.full.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let health = running.vitals.health();
    assert!(!health.ready, "{health:?}");
    assert!(
        health.live && health.registered && !health.store.reachable,
        "{health:?}"
    );

    running.full.store(false, Ordering::SeqCst);
    let space_back = Utc::now();
    let mut waited = Duration::ZERO;
    while !running.vitals.health().ready {
        assert!(waited < Duration::from_secs(35), "still not ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let store = running.stop().await;
    let after: Vec<i64> = seconds(&store, origin)
        .into_iter()
        .filter(|second| *second > 8)
        .collect();
    assert!(!after.is_empty(), "nothing ran after {space_back}");
}

/// Runs an hourly job `test::hourly`, with `jitter` or none, from 2026-01-01T00:00:00Z for 1 h 15 min,
/// on a store that claims with the finishes; when its handler started (tokio's clock, from the origin)
/// with the occurrence its context names, and how many times the executor called `claim_due`.
async fn hourly(jitter: Option<Duration>) -> (Vec<(Duration, DateTime<Utc>)>, u32, MemoryStore) {
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let started = tokio::time::Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let options = match jitter {
        Some(jitter) => JobOptions::new().jitter(jitter),
        None => JobOptions::new(),
    };
    let runtime = Runtime::builder()
        .module("test")
        .deployment("test@1")
        .registered_jobs(false)
        .memory_store(MemoryStore::starting_at(origin))
        .job_with("test::hourly", "0 * * * *", options, {
            let seen = Arc::clone(&seen);
            move || {
                let seen = Arc::clone(&seen);
                async move {
                    let at = crate::context().scheduled_at();
                    seen.lock().unwrap().push((started.elapsed(), at));
                }
            }
        })
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::Chaining);
    tokio::time::sleep(Duration::from_secs(75 * 60)).await;
    let calls = running.calls.load(Ordering::SeqCst);
    let store = running.stop().await;
    let seen = seen.lock().unwrap().clone();
    (seen, calls, store)
}

#[tokio::test(start_paused = true)]
async fn a_jittered_job_is_claimed_once_at_its_start_without_spinning() {
    let jitter = Duration::from_secs(600);
    let offset = cron_schema::jitter_offset("test", "test::hourly", jitter);
    assert!(offset > Duration::from_secs(1), "{offset:?}");
    let one = Utc.with_ymd_and_hms(2026, 1, 1, 1, 0, 0).unwrap();

    let (plain, plain_calls, _) = hourly(None).await;
    assert_eq!(plain, vec![(Duration::from_secs(3600), one)]);
    let (jittered, calls, store) = hourly(Some(jitter)).await;
    // Started at 01:00 plus its offset, to the millisecond, as the occurrence of 01:00.
    assert_eq!(jittered, vec![(Duration::from_secs(3600) + offset, one)]);
    let runs = store.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].scheduled_at, one);
    assert_eq!(
        runs[0].started_at,
        Some(one + chrono::TimeDelta::from_std(offset).unwrap())
    );
    // The executor slept until the start: no more claims than without jitter, give or take the one
    // a wake-up at the instant itself costs, where a loop woken for the row it cannot claim yet would
    // have claimed thousands of times.
    assert!(
        calls <= plain_calls + 2,
        "claims with jitter: {calls}, without: {plain_calls}"
    );
}

#[tokio::test(start_paused = true)]
async fn each_failure_reaches_the_listeners_once_and_a_slow_or_panicking_listener_delays_no_run() {
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    // The second listener holds its thread until the test lets it go: a listener that hangs.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Mutex::new(Some(held));
    let (origin, running) = every_second(|builder| {
        let heard = Arc::clone(&heard);
        builder
            .job("test::flaky", "* * * * * *", || async {
                Err::<(), _>("relay refused")
            })
            .on_event(|_: &Event| panic!("a listener that panics"))
            .on_event(move |event: &Event| {
                if let Some(held) = held.lock().unwrap().take() {
                    let _ = held.recv();
                }
                heard.lock().unwrap().push(event.clone());
            })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(10_500)).await;

    // Every occurrence of both jobs ran at its instant while the listener hung (those of 11 s are
    // claimed ahead, not run yet).
    let runs = running.store.runs();
    for verb in ["test::tick", "test::flaky"] {
        let of_verb: Vec<_> = runs
            .iter()
            .filter(|r| &*r.verb == verb && r.outcome.is_some())
            .collect();
        assert_eq!(of_verb.len(), 10, "{verb}: {of_verb:?}");
        assert!(of_verb.iter().all(|r| r.started_at == Some(r.scheduled_at)));
    }
    assert!(heard.lock().unwrap().is_empty());

    // Let go, it hears each failure once, in order, though the listener before it panicked at each;
    // shutdown waits for it.
    release.send(()).unwrap();
    running.stop().await;
    let heard = heard.lock().unwrap().clone();
    let seen: Vec<(EventKind, &str, i64, Option<&str>, u32)> = heard
        .iter()
        .map(|e| {
            (
                e.kind(),
                e.verb(),
                (e.scheduled_at() - origin).num_seconds(),
                e.error(),
                e.attempt(),
            )
        })
        .collect();
    let expected: Vec<_> = (1..=10)
        .map(|s| {
            (
                EventKind::Failed,
                "test::flaky",
                s,
                Some("relay refused"),
                1,
            )
        })
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test(start_paused = true)]
async fn the_last_failed_attempt_of_a_job_with_retries_is_retries_exhausted() {
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (origin, running) = every_second(|builder| {
        let heard = Arc::clone(&heard);
        builder
            .job_with(
                "test::retried",
                "5 * * * * *",
                JobOptions::new().retries(1).backoff(Duration::from_secs(1)),
                || async { Err::<(), _>("relay refused") },
            )
            .on_event(move |event: &Event| heard.lock().unwrap().push(event.clone()))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(10_000)).await;
    running.stop().await;
    let heard = heard.lock().unwrap().clone();
    let seen: Vec<(EventKind, i64, u32)> = heard
        .iter()
        .map(|e| {
            (
                e.kind(),
                (e.scheduled_at() - origin).num_seconds(),
                e.attempt(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::Failed, 5, 1),
            (EventKind::RetriesExhausted, 5, 2)
        ]
    );
}

/// Adds to `builder` a job `test::nightly`, due 5 s past each minute, that expects each occurrence to
/// succeed within 3 s and fails, and a listener that keeps every event in `heard`.
fn failing_nightly(
    builder: crate::RuntimeBuilder,
    heard: &Arc<Mutex<Vec<crate::Event>>>,
) -> crate::RuntimeBuilder {
    let heard = Arc::clone(heard);
    builder
        .job_with(
            "test::nightly",
            "5 * * * * *",
            JobOptions::new().expect_within(Duration::from_secs(3)),
            || async { Err::<(), _>("relay refused") },
        )
        .on_event(move |event: &crate::Event| heard.lock().unwrap().push(event.clone()))
}

/// What `heard` holds, each event as (kind, seconds from `origin`).
fn kinds_at(
    heard: &Mutex<Vec<crate::Event>>,
    origin: DateTime<Utc>,
) -> Vec<(crate::EventKind, i64)> {
    heard
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.kind(), (e.scheduled_at() - origin).num_seconds()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_occurrence_not_succeeded_within_expect_within_is_overdue_once_and_in_the_health_report()
{
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (origin, running) = every_second(|builder| failing_nightly(builder, &heard)).await;
    // The occurrence of 5 s failed; from 8 s it is overdue, found at the next check (every 5 s).
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(running.vitals.health().overdue.is_empty());
    tokio::time::sleep(Duration::from_secs(13)).await;
    let overdue = running.vitals.health().overdue;
    assert_eq!(overdue.len(), 1, "{overdue:?}");
    assert_eq!(overdue[0].verb, "test::nightly");
    assert_eq!(
        overdue[0].occurrence,
        origin + chrono::TimeDelta::seconds(5)
    );
    running.stop().await;
    // Checked four times past its deadline, reported once.
    assert_eq!(
        kinds_at(&heard, origin),
        [(EventKind::Failed, 5), (EventKind::Overdue, 5)]
    );
    let overdue = heard.lock().unwrap()[1].clone();
    assert_eq!(overdue.expect_within(), Some(Duration::from_secs(3)));
}

/// A module of one job, which expects each occurrence within 3 s and fails: nothing else wakes the
/// executor between its occurrences (a minute apart), and its overdue occurrence is still found by the
/// check every 5 s and reported once.
#[tokio::test(start_paused = true)]
async fn the_only_job_of_a_module_not_succeeded_within_expect_within_is_overdue_once() {
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (origin, running) = from_origin(|builder| failing_nightly(builder, &heard)).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let overdue = running.vitals.health().overdue;
    running.stop().await;
    assert_eq!(overdue.len(), 1, "{overdue:?}");
    assert_eq!(
        kinds_at(&heard, origin),
        [(EventKind::Failed, 5), (EventKind::Overdue, 5)]
    );
}

/// What `heard` holds, each event as (kind, verb, seconds from `origin`, attempt, skipped, reason).
fn events_of(
    heard: &Mutex<Vec<crate::Event>>,
    origin: DateTime<Utc>,
) -> Vec<(
    crate::EventKind,
    String,
    i64,
    u32,
    u32,
    Option<crate::SkipReason>,
)> {
    heard
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.kind(),
                e.verb().to_owned(),
                (e.scheduled_at() - origin).num_seconds(),
                e.attempt(),
                e.skipped(),
                e.skip_reason(),
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_failure_of_a_job_without_retries_is_failed_never_retries_exhausted() {
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (origin, running) = every_second(|builder| {
        let heard = Arc::clone(&heard);
        builder
            .job("test::once", "5 * * * * *", || async {
                Err::<(), _>("relay refused")
            })
            .on_event(move |event: &Event| heard.lock().unwrap().push(event.clone()))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    running.stop().await;
    // Its only attempt is its last, but no retry was ever to follow: `failed` alone
    // (docs/runtime.md, "Events").
    assert_eq!(
        events_of(&heard, origin),
        [(EventKind::Failed, "test::once".to_owned(), 5, 1, 0, None)]
    );
}

#[tokio::test(start_paused = true)]
async fn occurrences_skipped_while_a_run_went_on_are_one_skipped_event_of_reason_overlap() {
    use crate::{Event, EventKind, SkipReason};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (origin, running) = every_second(|builder| {
        let heard = Arc::clone(&heard);
        builder
            // Due every second, each run lasting 2.5 s: the run of 1 s goes on through 2 s and 3 s.
            .job("test::long", "* * * * * *", || async {
                if cronverb_second() == 1 {
                    tokio::time::sleep(Duration::from_millis(2_500)).await;
                }
            })
            .on_event(move |event: &Event| heard.lock().unwrap().push(event.clone()))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    running.stop().await;
    assert_eq!(
        events_of(&heard, origin),
        [(
            EventKind::Skipped,
            "test::long".to_owned(),
            1,
            0,
            2,
            Some(SkipReason::Overlap)
        )]
    );
}

/// The second of the minute of the run going on.
fn cronverb_second() -> u32 {
    use chrono::Timelike;
    crate::context().scheduled_at().second()
}

#[tokio::test(start_paused = true)]
async fn a_late_occurrence_its_policy_skips_is_a_skipped_event_of_reason_missed() {
    use crate::{Event, EventKind, SkipReason};
    let origin = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let store = MemoryStore::starting_at(origin);
    let held = Held::default();
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    let listener = Arc::clone(&heard);
    let runtime = one_slot_two_skipping_jobs(&store, &held)
        .on_event(move |event: &Event| listener.lock().unwrap().push(event.clone()))
        .build()
        .await
        .unwrap();
    let running = run_faulty(runtime, Fault::Chaining);
    tokio::time::sleep(Duration::from_secs(70)).await;
    running.stop().await;
    assert_eq!(
        events_of(&heard, origin),
        [(
            EventKind::Skipped,
            "test::second".to_owned(),
            60,
            0,
            1,
            Some(SkipReason::Missed)
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_the_listeners_to_hear_every_event_queued() {
    use crate::{Event, EventKind};
    let heard: Arc<Mutex<Vec<Event>>> = Arc::default();
    // The listener is slow: it hears the first event only once the test lets it, from a thread of
    // the test's, 300 ms of real time after shutdown began.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Mutex::new(Some(held));
    let (origin, running) = every_second(|builder| {
        let heard = Arc::clone(&heard);
        builder
            .job("test::flaky", "* * * * * *", || async {
                Err::<(), _>("relay refused")
            })
            .on_event(move |event: &Event| {
                if let Some(held) = held.lock().unwrap().take() {
                    let _ = held.recv();
                }
                heard.lock().unwrap().push(event.clone());
            })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let releasing = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        release.send(()).unwrap();
    });
    running.stop().await;
    // Once shutdown has returned, every event raised has been heard: none is lost with the process.
    let seen: Vec<(EventKind, i64)> = events_of(&heard, origin)
        .into_iter()
        .map(|(kind, _, at, ..)| (kind, at))
        .collect();
    assert_eq!(
        seen,
        (1..=5).map(|s| (EventKind::Failed, s)).collect::<Vec<_>>()
    );
    releasing.join().unwrap();
}

/// docs/runtime.md, "History retention": a call of the retention that deleted as many runs as a call
/// may leaves more, and the next comes a second later, until one deletes fewer; then an hour later.
/// (At one call an hour the retention removed 10,000 runs an hour, whatever the rate runs are written.)
#[tokio::test(start_paused = true)]
async fn the_retention_goes_on_at_once_while_a_backlog_lasts_then_hourly() {
    let start = tokio::time::Instant::now();
    let (_, running) = every_second_with(Fault::Backlog(3), |builder| builder).await;
    tokio::time::sleep(Duration::from_secs(2 * 3600)).await;
    let prunes: Vec<u64> = running
        .prunes
        .lock()
        .unwrap()
        .iter()
        .map(|at| (*at - start).as_secs())
        .collect();
    running.stop().await;

    // The first a minute after start; three full calls, each followed a second later by the next;
    // the fourth deleted a few, so the fifth is an hour after it.
    assert_eq!(prunes, [60, 61, 62, 63, 3663], "seconds after start");
}
