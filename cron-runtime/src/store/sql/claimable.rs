//! Which rows a claim may take. The rule is written once per form of the row it reads: for the idle
//! rows a claim reads in SQL, in each database's statements ([`Steps::claim_due`] and
//! [`Steps::next_due`]; PostgreSQL's `claimable_rows!`, `store/postgres/sql/jobs.rs`); for a row whose
//! run ends and whose next occurrence is claimed in the same transaction (a chained claim),
//! [`may_chain`]. Both take only rows whose schedule text this store checked ([`Claimable`]).
//!
//! [`Steps::claim_due`]: super::Steps::claim_due
//! [`Steps::next_due`]: super::Steps::next_due

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Known;
use crate::store::Runner;
use crate::store::rules::Held;
use crate::store::rules::is_late;
use crate::sync::lock;

/// The rows whose text this store checked (registration, heartbeats), by verb: a claim gives a row a
/// run only when its `(schedule, timezone)` is still the one checked for its verb, so a row edited since
/// is never started unchecked.
///
/// The check is made here, on the rows the claim locked, rather than in its SQL: matching every row
/// against a constant array of every checked key makes planning the claim grow with the deployment
/// (docs/benchmarks.md). A row that fails is *refused*: left idle, and left out of the claims (by id)
/// until the rows are checked again, which starts a new `Claimable`.
#[derive(Debug, Clone, Default)]
pub(super) struct Claimable {
    rows: HashMap<String, (String, String)>,
    refused: Arc<Mutex<Vec<i64>>>,
}

impl Claimable {
    pub(super) fn push(&mut self, verb: String, expression: String, zone: String) {
        self.rows.insert(verb, (expression, zone));
    }

    /// Whether a row of `verb` with this text may be claimed.
    pub(super) fn contains(&self, verb: &str, expression: &str, zone: &str) -> bool {
        self.rows
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
}

/// Whether a chained claim takes `next`, the next occurrence of the job whose run ends on `held`: where
/// `claimable_rows!` would take the row were it idle, and due within the chain's horizon. The deployment
/// is active (read after the lock), the row is not paused and has no pending trigger (the claim takes
/// the trigger), the run that ends is not a manual one, the occurrence is not late, and the row's text
/// is one this store checked. The row's own verb is the one executing, so no other deployment's is.
pub(super) fn may_chain(chain: &Chain<'_>, held: &Held, next: DateTime<Utc>) -> bool {
    held.active
        && !held.manual
        && !held.paused
        && !held.triggered
        && next <= held.now + chain.ahead
        && !is_late(next, held.now, chain.tolerance)
        && chain
            .known
            .claimable
            .contains(&held.verb, &held.expression, &held.zone)
}
