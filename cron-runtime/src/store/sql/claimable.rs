//! Which rows a claim may take. The rule is written once per form of the row it reads: for the idle
//! rows a claim reads in SQL, [`claimable_rows!`], which each database's statements
//! ([`Steps::claim_due`] and [`Steps::next_due`]) include in its own spelling of the parameters; for a
//! row whose run ends and whose next occurrence is claimed in the same transaction (a chained claim),
//! [`may_chain`]. Both take only rows whose schedule text this store checked ([`Claimable`]).
//!
//! [`Steps::claim_due`]: super::Steps::claim_due
//! [`Steps::next_due`]: super::Steps::next_due

/// Which rows a claim may take (G2, G3 and G6, docs/operations.md), the one definition every SQL
/// store's claim reads (`Steps::claim_due`, `Steps::next_due`), each database spelling its parameters:
/// the idle job rows of deployment `deployment` while it is the active one, less the ids this store
/// refused since it last checked its rows (`not_refused`), less the jobs on every replica (each replica
/// runs them itself: docs/runtime.md, "Jobs on every replica"; `not_every_replica`), and less the verbs
/// executing under any other deployment of the module (no overlap across a deploy). Reads
/// `cron_jobs j` joined to its deployment `d`; a statement adds which occurrence is due and how far
/// ahead.
///
/// A row whose run ends and whose next occurrence is claimed in the same transaction (a chained claim)
/// is still executing, so this cannot read it: [`may_chain`] applies the same rule to it.
macro_rules! claimable_rows {
    (
        deployment: $deployment:literal,
        not_refused: $not_refused:literal,
        not_every_replica: $not_every_replica:literal $(,)?
    ) => {
        concat!(
            "FROM cron_jobs j
    JOIN cron_deployments d ON d.id = j.deployment_id
    WHERE j.deployment_id = ",
            $deployment,
            "
      AND d.active
      AND j.state = 'idle'
      AND ",
            $not_refused,
            "
      AND ",
            $not_every_replica,
            "
      AND j.verb NOT IN (
          SELECT o.verb FROM cron_jobs o
          WHERE o.state = 'executing'
            AND o.module_name = (SELECT module FROM cron_deployments WHERE id = ",
            $deployment,
            ")
            AND o.deployment_id <> ",
            $deployment,
            ")"
        )
    };
}
pub(crate) use claimable_rows;

/// Whether this replica owns a claimable row's occurrence (`rules::Spread::owns`; docs/runtime.md,
/// "How work is spread"): `(id + seconds / rotation) mod replicas = rank`, `seconds` the row's
/// `next_execution` in whole seconds since the epoch, each database spelling it and the parameters.
/// Ids and instants are positive, so SQL's truncating `/` and `%` are Rust's `div_euclid` and
/// `rem_euclid` there.
macro_rules! owned_occurrence {
    (
        seconds: $seconds:literal,
        replicas: $replicas:literal,
        rank: $rank:literal,
        rotation: $rotation:literal $(,)?
    ) => {
        concat!(
            "(j.id + ", $seconds, " / ", $rotation, ") % ", $replicas, " = ", $rank
        )
    };
}
pub(crate) use owned_occurrence;

/// Whether a claim may take a claimable row's regular occurrence (`rules::Spread::may_take`): this
/// replica owns it (`owned`, the database's `owned_occurrence!`), or it is `rules::GRACE` past its
/// start (`start`, the row's jittered start), `grace_ago` being the claim's now less the grace.
macro_rules! spread_takes {
    (owned: [$($owned:tt)*], start: [$($start:tt)*], grace_ago: $grace_ago:literal $(,)?) => {
        concat!("
      AND (", $($owned)*, " OR ", $($start)*, " <= ", $grace_ago, ")")
    };
}
pub(crate) use spread_takes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Known;
use crate::store::Runner;
use crate::store::rules::is_late;
use crate::store::rules::{Held, Spread};
use crate::sync::lock;

/// The rows whose text this store checked (registration, heartbeats), by verb: a claim gives a row a
/// run only when its `(schedule, timezone)` is still the one checked for its verb, so a row edited since
/// is never started unchecked.
///
/// The check is made here, on the rows the claim locked, rather than in its SQL: matching every row
/// against a constant array of every checked key makes planning the claim grow with the deployment
/// (docs/benchmarks.md). A row that fails is *refused*: left idle, and left out of the claims (by id)
/// until the rows are checked again, which starts a new `Claimable`.
///
/// A claim checks a due row whose text changed (an operator's override) on the spot and adds it here
/// ([`Claimable::push`]), so the rows are shared, as the refused ids are.
#[derive(Debug, Clone, Default)]
pub(super) struct Claimable {
    rows: Arc<Mutex<HashMap<String, (String, String)>>>,
    refused: Arc<Mutex<Vec<i64>>>,
}

impl Claimable {
    pub(super) fn push(&self, verb: String, expression: String, zone: String) {
        lock(&self.rows).insert(verb, (expression, zone));
    }

    /// Whether a row of `verb` with this text may be claimed.
    pub(super) fn contains(&self, verb: &str, expression: &str, zone: &str) -> bool {
        lock(&self.rows)
            .get(verb)
            .is_some_and(|(e, z)| e == expression && z == zone)
    }

    /// The ids of the rows refused since the rows were checked.
    pub(super) fn refused(&self) -> Vec<i64> {
        lock(&self.refused).clone()
    }

    pub(super) fn refuse(&self, ids: &[i64]) {
        let mut refused = lock(&self.refused);
        for id in ids {
            if !refused.contains(id) {
                refused.push(*id);
            }
        }
    }
}

/// A chained claim: the next occurrences that a batch of finishes claims with them
/// ([`Store::finish`](crate::store::Store::finish) with a horizon).
#[derive(Debug, Clone, Copy)]
pub(super) struct Chain<'a> {
    /// The runner whose runs end, and that claims.
    pub(super) runner: &'a Runner,
    /// Its deployment, with the rows it checked.
    pub(super) known: &'a Known,
    /// How far after the store's now an occurrence may be.
    pub(super) ahead: Duration,
    /// The missed-run tolerance: an occurrence later than this is left to the claim, which records it
    /// late.
    pub(super) tolerance: Duration,
    /// The runner's place among the live replicas: it chains only the occurrences it owns.
    pub(super) spread: Spread,
}

/// Whether a chained claim takes `next`, the next occurrence of the job whose run ends on `held`: where
/// `claimable_rows!` would take the row were it idle, and due to start (its jittered start,
/// [`Held::start_of`]; docs/runtime.md, "Jitter") within the chain's horizon. The deployment is active
/// (read after the lock), the row is not paused and has no pending trigger (the claim takes the
/// trigger), the run that ends is not a manual one, the occurrence is not late from its start, and
/// the row's text is one this store checked. The row's own verb is the one executing, so no other
/// deployment's is. And the runner owns the occurrence among the live replicas ([`Spread::owns`]):
/// one it does not own goes back to idle, where its owner's claim takes it (docs/runtime.md, "How
/// work is spread").
pub(super) fn may_chain(chain: &Chain<'_>, held: &Held, next: DateTime<Utc>) -> bool {
    let start = held.start_of(next);
    held.active
        && !held.manual
        && !held.paused
        && !held.triggered
        && start <= held.now + chain.ahead
        && !is_late(start, held.now, chain.tolerance)
        && chain.spread.owns(held.job_id, next)
        && chain
            .known
            .claimable
            .contains(&held.verb, &held.expression, &held.zone)
}
