//! Each runner's reading of its deployment's live replicas, as a SQL store keeps it between the
//! statements that read them (docs/runtime.md, "How work is spread"): its place among them
//! ([`Spread`]), and whether it is fresh enough to claim or chain by.
//!
//! A reading is read again before it is used once it is [`FRESH`] old, or once the store heard that the
//! live replicas changed ([`Readings::expire`]: a replica drained or deregistered), so one that nobody
//! refreshed for long is of no use to anyone: a runner that deregistered takes its own with it
//! ([`Readings::forget`]), and one left by a runner that stopped without deregistering is dropped once
//! [`FORGOTTEN`] old, so that a store that outlives many runtimes keeps only its live ones.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::rules::{FRESH, Spread};
use crate::sync::lock;

/// How long a reading nobody refreshed is kept: far past [`FRESH`], after which it would be read again
/// before any use anyway, and past any heartbeat's interval, at which a live runner reads again.
const FORGOTTEN: Duration = Duration::from_secs(600);

/// The readings of the runners registered through one store, by runner id, and how many times the
/// store heard that the live replicas changed: a reading taken across such a change is kept already
/// expired, so that a change heard while a statement read the replicas is not lost.
#[derive(Debug, Default)]
pub(super) struct Readings(Mutex<Kept>);

#[derive(Debug, Default)]
struct Kept {
    by_runner: HashMap<i64, Reading>,
    changes: u64,
}

/// When a reading began: [`Readings::began`], handed to [`Readings::keep`] with what was read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Began(u64);

#[derive(Debug, Clone, Copy)]
struct Reading {
    spread: Spread,
    /// When it was read.
    read: Instant,
    /// Whether the store heard since that the live replicas changed.
    expired: bool,
}

impl Readings {
    /// Runner `runner_id`'s place among its deployment's live replicas, as it last read them; alone
    /// if it never did.
    pub(super) fn spread(&self, runner_id: i64) -> Spread {
        lock(&self.0)
            .by_runner
            .get(&runner_id)
            .map(|reading| reading.spread)
            .unwrap_or_default()
    }

    /// Whether runner `runner_id` must read the live replicas again before it claims or chains at
    /// `now`: it never read them, read them [`FRESH`] ago or more, or they changed since.
    pub(super) fn is_stale(&self, runner_id: i64, now: Instant) -> bool {
        lock(&self.0)
            .by_runner
            .get(&runner_id)
            .is_none_or(|reading| {
                reading.expired || now.saturating_duration_since(reading.read) >= FRESH
            })
    }

    /// A reading of the live replicas begins (before its statement runs).
    pub(super) fn began(&self) -> Began {
        Began(lock(&self.0).changes)
    }

    /// Keeps what runner `runner_id` read at `now`, in a reading that `began`: expired already if the
    /// store heard the live replicas change since, since the statement may have read them before the
    /// change. Drops the readings nobody refreshed for [`FORGOTTEN`].
    pub(super) fn keep(&self, runner_id: i64, spread: Spread, began: Began, now: Instant) {
        let mut kept = lock(&self.0);
        let expired = kept.changes != began.0;
        kept.by_runner
            .retain(|_, reading| now.saturating_duration_since(reading.read) < FORGOTTEN);
        kept.by_runner.insert(
            runner_id,
            Reading {
                spread,
                read: now,
                expired,
            },
        );
    }

    /// The live replicas changed (the store heard a replica drain or deregister): every runner reads
    /// them again before it next claims or chains.
    pub(super) fn expire(&self) {
        let mut kept = lock(&self.0);
        kept.changes += 1;
        for reading in kept.by_runner.values_mut() {
            reading.expired = true;
        }
    }

    /// Runner `runner_id` deregistered: its reading goes with it.
    pub(super) fn forget(&self, runner_id: i64) {
        lock(&self.0).by_runner.remove(&runner_id);
    }

    #[cfg(test)]
    fn runners(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = lock(&self.0).by_runner.keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: Spread = Spread {
        rank: 1,
        replicas: 2,
    };

    #[test]
    fn a_reading_is_stale_once_fresh_old_or_once_the_replicas_changed() {
        let readings = Readings::default();
        let start = Instant::now();
        assert!(readings.is_stale(7, start));
        readings.keep(7, TWO, readings.began(), start);
        assert_eq!(readings.spread(7), TWO);
        assert!(!readings.is_stale(7, start + FRESH / 2));
        assert!(readings.is_stale(7, start + FRESH));
        readings.expire();
        assert!(readings.is_stale(7, start));
        assert_eq!(readings.spread(7), TWO, "kept until read again");
        readings.keep(7, Spread::ALONE, readings.began(), start);
        assert!(!readings.is_stale(7, start));
    }

    #[test]
    fn a_change_heard_while_a_reading_was_taken_leaves_it_expired() {
        // The statement read the replicas before one drained; the store heard the drain before the
        // reading was kept: the reading must be read again, not trusted for FRESH.
        let readings = Readings::default();
        let start = Instant::now();
        let began = readings.began();
        readings.expire();
        readings.keep(7, TWO, began, start);
        assert!(readings.is_stale(7, start));
        // Read again, with no change heard meanwhile: fresh.
        readings.keep(7, Spread::ALONE, readings.began(), start);
        assert!(!readings.is_stale(7, start));
    }

    #[test]
    fn the_readings_of_runners_gone_are_dropped() {
        let readings = Readings::default();
        let start = Instant::now();
        for runner in 1..=3 {
            readings.keep(runner, TWO, readings.began(), start);
        }
        // Runner 1 deregisters: its reading goes at once.
        readings.forget(1);
        assert_eq!(readings.runners(), vec![2, 3]);
        assert_eq!(readings.spread(1), Spread::ALONE);
        // Runner 3 stops without deregistering; runner 2 goes on reading: 3's reading is dropped
        // once nobody refreshed it for long, at 2's next reading.
        readings.keep(2, TWO, readings.began(), start + FORGOTTEN / 2);
        assert_eq!(readings.runners(), vec![2, 3]);
        readings.keep(2, TWO, readings.began(), start + FORGOTTEN);
        assert_eq!(readings.runners(), vec![2]);
        assert!(readings.is_stale(3, start + FORGOTTEN));
    }
}
