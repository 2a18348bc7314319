//! The executor's two clocks: the store's, which decides what is due, mapped onto tokio's, which
//! decides how long to sleep ([`Anchor`]); and instants on tokio's clock packed into an atomic, as
//! nanoseconds after an epoch ([`at_nanos`], [`nanos_after`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// Maps the store's clock onto tokio's, as measured at a claim (G1, docs/operations.md: the store's
/// clock decides what is due, the app's clock only how long to sleep).
#[derive(Debug, Clone, Copy)]
pub(super) struct Anchor {
    /// The local instant at which the store's clock read `store_now`.
    pub(super) instant: Instant,
    /// What the store's clock read then.
    pub(super) store_now: DateTime<Utc>,
}

impl Anchor {
    /// What the store's clock reads at the local instant `at`.
    #[inline]
    pub(super) fn store_time(&self, at: Instant) -> DateTime<Utc> {
        let since = at.saturating_duration_since(self.instant);
        let before = self.instant.saturating_duration_since(at);
        self.store_now + chrono::TimeDelta::from_std(since).unwrap_or_default()
            - chrono::TimeDelta::from_std(before).unwrap_or_default()
    }

    /// The local instant at which the store's clock reads `at`.
    #[inline]
    pub(super) fn instant_for(&self, at: DateTime<Utc>) -> Instant {
        let delta = at - self.store_now;
        match delta.to_std() {
            Ok(ahead) => self.instant + ahead,
            Err(_) => self
                .instant
                .checked_sub((-delta).to_std().unwrap_or_default())
                .unwrap_or(self.instant),
        }
    }
}

/// The instant `nanos` nanoseconds after `epoch` (none before it).
#[inline]
pub(super) fn at_nanos(epoch: Instant, nanos: i64) -> Instant {
    epoch + Duration::from_nanos(nanos.max(0) as u64)
}

/// How many nanoseconds after `epoch` the instant `at` is (0 before it, `i64::MAX` at most).
#[inline]
pub(super) fn nanos_after(epoch: Instant, at: Instant) -> i64 {
    i64::try_from(at.saturating_duration_since(epoch).as_nanos()).unwrap_or(i64::MAX)
}
