//! A forward step of the store's clock, seen against this process's monotonic clock, holds back the
//! recovery of expired leases (docs/runtime.md, "Leases: a frozen replica cannot run on").
//!
//! Leases are instants of the store's clock, a wall clock (the host's for SQLite, the database's for
//! PostgreSQL). A step forward larger than what is left of a lease (an administrator setting the date,
//! NTP correcting a clock far off, a VM resumed) makes every lease held look expired, and a recovery
//! would take back runs whose replicas are alive and renewing. Each store handle keeps a
//! [`ClockWatch`]: when it recovers (on the host's clock, SQLite's: at every heartbeat; on a database's,
//! PostgreSQL's: at a heartbeat that finds a lease expired, so that the others cost no statement more)
//! it compares how far the store's
//! clock moved since the last reading with how far tokio's clock (monotonic) moved over the same
//! interval, however long; when the store's moved further by more than
//! [`tolerance`], it takes nothing back for one lease of monotonic time, in which every live holder
//! renews (every third of the lease) and so holds a lease on the stepped clock again. A frozen holder
//! does not, and is taken back after it: a step delays a real recovery by one lease at most.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::sync::lock;

/// What the last recovery saw, and how long recovery is held back.
#[derive(Debug, Default)]
pub(crate) struct ClockWatch {
    state: std::sync::Mutex<Watched>,
}

#[derive(Debug, Default)]
struct Watched {
    /// The store's clock at the last recovery, and the local instant it was read at.
    last: Option<(DateTime<Utc>, Instant)>,
    /// No lease is taken back before this local instant: a step was seen.
    hold_until: Option<Instant>,
}

/// How much further than the monotonic clock the store's may move between two recoveries before it is
/// taken for a step: a tenth of the lease, at least a second. Reading the store's clock costs up to a
/// round trip and slewing clocks drift apart by microseconds a second, far less than this; a step this
/// small leaves most of every renewed lease.
pub(crate) fn tolerance(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_secs(1))
}

impl ClockWatch {
    /// Whether a recovery may take back expired leases now, with `lease` the store's: the store's clock
    /// read `clock` at the local instant `at`. False from a step forward of the store's clock (seen
    /// between this recovery and the previous one) until one lease of local time after it.
    pub(crate) fn may_take_back(&self, clock: DateTime<Utc>, at: Instant, lease: Duration) -> bool {
        let mut watched = lock(&self.state);
        if let Some((last_clock, last_at)) = watched.last {
            let local = at.saturating_duration_since(last_at);
            // A clock stepped back moves less than the local one: leases look longer, and recovery waits.
            let moved = (clock - last_clock).to_std().unwrap_or_default();
            if moved > local + tolerance(lease) {
                let step = moved - local;
                tracing::warn!(
                    step_secs = step.as_secs_f64(),
                    "the store's clock jumped {step:?} ahead of this process's monotonic clock: no \
                     expired lease is taken back for one lease ({lease:?}), so that the replicas \
                     holding them can renew on the new time"
                );
                watched.hold_until = Some(at + lease);
            }
        }
        watched.last = Some((clock, at));
        match watched.hold_until {
            Some(until) if at < until => false,
            _ => {
                watched.hold_until = None;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    fn start() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    /// Reads the store's clock `store` seconds after [`start`], `local` seconds after `origin`.
    fn seen(watch: &ClockWatch, origin: Instant, store: f64, local: f64) -> bool {
        let clock = start() + TimeDelta::milliseconds((store * 1000.0) as i64);
        watch.may_take_back(clock, origin + Duration::from_secs_f64(local), LEASE)
    }

    #[test]
    fn clocks_moving_together_never_hold_recovery() {
        let watch = ClockWatch::default();
        let origin = Instant::now();
        // Heartbeats every 10 s, the store's reading late or early by up to half a second.
        for (store, local) in [(0.0, 0.0), (10.5, 10.0), (19.5, 20.0), (30.0, 30.0)] {
            assert!(seen(&watch, origin, store, local), "{store} at {local}");
        }
        // A gap of an hour between recoveries (a replica idle, or suspended with its store): no step.
        assert!(seen(&watch, origin, 3630.0, 3630.0));
    }

    #[test]
    fn a_forward_step_holds_recovery_for_one_lease_of_local_time() {
        let watch = ClockWatch::default();
        let origin = Instant::now();
        assert!(seen(&watch, origin, 0.0, 0.0));
        // The store's clock steps an hour forward between two heartbeats 10 s apart.
        assert!(!seen(&watch, origin, 3610.0, 10.0));
        assert!(!seen(&watch, origin, 3620.0, 20.0));
        assert!(!seen(&watch, origin, 3639.9, 39.9));
        // One lease after the step was seen, the leases not renewed since are expired for real.
        assert!(seen(&watch, origin, 3640.0, 40.0));
        assert!(seen(&watch, origin, 3650.0, 50.0));
    }

    #[test]
    fn a_second_step_during_the_hold_extends_it_and_a_small_one_does_not_count() {
        let watch = ClockWatch::default();
        let origin = Instant::now();
        assert!(seen(&watch, origin, 0.0, 0.0));
        assert!(!seen(&watch, origin, 100.0, 10.0));
        assert!(!seen(&watch, origin, 200.0, 20.0));
        // Held until 20 s + the lease.
        assert!(!seen(&watch, origin, 229.0, 49.0));
        assert!(seen(&watch, origin, 230.0, 50.0));
        // Within the tolerance (3 s for a 30 s lease): not a step.
        assert!(seen(&watch, origin, 242.9, 60.0));
        // Back: leases look longer, nothing is held.
        assert!(seen(&watch, origin, 100.0, 70.0));
    }

    #[test]
    fn the_tolerance_is_a_tenth_of_the_lease_and_at_least_a_second() {
        assert_eq!(tolerance(Duration::from_secs(30)), Duration::from_secs(3));
        assert_eq!(tolerance(Duration::from_secs(3)), Duration::from_secs(1));
    }
}
