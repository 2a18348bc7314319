//! How a running runtime is doing, for health probes (docs/operations.md, "Health checks"): the facts
//! the executor keeps ([`Vitals`]) and the report made of them ([`Health`]).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::time::Instant;

use crate::rfc3339;

/// How often the claim loop marks that it is going round, whatever it waits for: its next due
/// instant, a store that does not answer, a retry.
pub(crate) const TICK_EVERY: Duration = Duration::from_secs(5);

/// The claim loop is live while it marked a tick within this much: six ticks, so that a busy machine
/// does not fail the probe.
pub(crate) const LIVE_WITHIN: Duration = Duration::from_secs(30);

/// `store_down_since` when the store answered last.
const REACHABLE: i64 = i64::MIN;

/// What the executor keeps up to date for [`Health`]; shared by the runtime's handle and its tasks.
#[derive(Debug)]
pub(crate) struct Vitals {
    /// Where `last_tick` counts from.
    epoch: Instant,
    registered: AtomicBool,
    draining: AtomicBool,
    stopped: AtomicBool,
    /// The claim loop's last tick, in nanoseconds after `epoch`.
    last_tick: AtomicI64,
    /// Since when (microseconds since the Unix epoch) every call to the store has failed, or
    /// [`REACHABLE`].
    store_down_since: AtomicI64,
    /// The jobs overdue as the replica last found them (docs/operations.md, "Overdue").
    overdue: Mutex<Vec<OverdueJob>>,
}

impl Vitals {
    /// A runtime starting now: not registered, its claim loop just ticked.
    pub(crate) fn new() -> Arc<Vitals> {
        Arc::new(Vitals {
            epoch: Instant::now(),
            registered: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            last_tick: AtomicI64::new(0),
            store_down_since: AtomicI64::new(REACHABLE),
            overdue: Mutex::new(Vec::new()),
        })
    }

    /// The claim loop is going round.
    pub(crate) fn tick(&self) {
        let nanos = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos();
        self.last_tick
            .store(i64::try_from(nanos).unwrap_or(i64::MAX), Ordering::Release);
    }

    pub(crate) fn registered(&self) {
        self.registered.store(true, Ordering::Release);
    }

    /// Shutdown has begun: no more claims.
    pub(crate) fn draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// The executor has ended.
    pub(crate) fn stopped(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// The store answered. One load when it was reachable already: every recorded batch calls it.
    #[inline]
    pub(crate) fn store_reached(&self) {
        if self.store_down_since.load(Ordering::Acquire) != REACHABLE {
            self.store_down_since.store(REACHABLE, Ordering::Release);
        }
    }

    /// A call to the store failed (it could not be reached, or refused a statement); the first failure
    /// since it last answered is when it went away.
    pub(crate) fn store_failed(&self) {
        let _ = self.store_down_since.compare_exchange(
            REACHABLE,
            Utc::now().timestamp_micros(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// The jobs overdue now, as the replica's latest check found them.
    pub(crate) fn overdue(&self, overdue: Vec<OverdueJob>) {
        *crate::sync::lock(&self.overdue) = overdue;
    }

    /// The report, now.
    pub(crate) fn health(&self) -> Health {
        let since_tick = Duration::from_nanos(
            u64::try_from(self.last_tick.load(Ordering::Acquire)).unwrap_or(0),
        );
        let tick_at = self.epoch + since_tick;
        let tick_age = Instant::now().saturating_duration_since(tick_at);
        let last_tick = Utc::now() - tick_age;
        let down = self.store_down_since.load(Ordering::Acquire);
        let registered = self.registered.load(Ordering::Acquire);
        let draining = self.draining.load(Ordering::Acquire);
        let stopped = self.stopped.load(Ordering::Acquire);
        Health {
            live: !stopped && tick_age <= LIVE_WITHIN,
            ready: registered && !draining && !stopped && down == REACHABLE,
            registered,
            draining,
            stopped,
            last_tick,
            overdue: crate::sync::lock(&self.overdue).clone(),
            store: StoreHealth {
                reachable: down == REACHABLE,
                unreachable_since: (down != REACHABLE)
                    .then(|| DateTime::from_timestamp_micros(down))
                    .flatten(),
            },
        }
    }
}

/// How a runtime is doing ([`RuntimeHandle::health`](crate::RuntimeHandle::health)), as the health
/// routes of the dashboard serve it (docs/operations.md, "Health checks").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Health {
    /// The claim loop has gone round within [`LIVE_WITHIN`] and the runtime has not stopped: facts of
    /// this process only, never of the store, so that a database outage fails no liveness probe.
    pub live: bool,
    /// Registered with the store, neither shutting down nor stopped, and the store's last call
    /// answered: ready for work. A replica whose store refuses its writes (a full disk, a database
    /// outage) can run nothing, and is not ready until a call succeeds again.
    pub ready: bool,
    /// This replica is registered with its store (it retries while the store is away at start).
    pub registered: bool,
    /// Shutdown has begun: no more claims; runs in flight get the grace period.
    pub draining: bool,
    /// The runtime has stopped (after shutdown, or on an error).
    pub stopped: bool,
    /// When the claim loop last went round (it does every few seconds, whatever it waits for).
    #[serde(with = "rfc3339")]
    pub last_tick: DateTime<Utc>,
    /// Whether the store answers.
    pub store: StoreHealth,
    /// The jobs with `expect_within` whose expected occurrence has not succeeded, as this replica last
    /// checked (every few seconds; only the active deployment's replicas check): the same rule as the
    /// overdue event and `cron_job_overdue` (docs/operations.md, "Overdue"). Neither `live` nor `ready`
    /// depends on it: an overdue job is the job's trouble, not the replica's.
    pub overdue: Vec<OverdueJob>,
}

/// A job overdue ([`Health::overdue`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OverdueJob {
    /// The job's verb.
    pub verb: String,
    /// The occurrence that has not succeeded.
    #[serde(with = "rfc3339")]
    pub occurrence: DateTime<Utc>,
}

/// Whether the store answers ([`Health::store`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StoreHealth {
    /// The last call to the store succeeded.
    pub reachable: bool,
    /// Since when every call to the store has failed; `None` while it is reachable.
    #[serde(with = "rfc3339::option")]
    pub unreachable_since: Option<DateTime<Utc>>,
}

/// A runtime's health, readable from anywhere for as long as it is kept, after its
/// [`RuntimeHandle`](crate::RuntimeHandle) is gone too ([`RuntimeHandle::health_check`]). Cloning is
/// cheap.
///
/// [`RuntimeHandle::health_check`]: crate::RuntimeHandle::health_check
#[derive(Debug, Clone)]
pub struct HealthCheck {
    pub(crate) vitals: Arc<Vitals>,
}

impl HealthCheck {
    /// The runtime's health now.
    pub fn health(&self) -> Health {
        self.vitals.health()
    }
}
