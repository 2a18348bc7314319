//! How long a failed attempt waits before it is tried again (docs/runtime.md, "Retries"): one rule for
//! the executor, which asks for a retry with a finish, and for the stores, which ask for one when they
//! take an attempt back from a replica that stopped renewing its lease.

use std::time::Duration;

use crate::defaults::MAX_BACKOFF;
use crate::store::{Outcome, Retries};

/// The wait after attempt `attempt` of a run ended with `outcome` before its occurrence is tried again,
/// or `None` when it is not: it succeeded (or was cancelled or skipped), or the job has no retries
/// left. An attempt `abandoned` (its replica died, or left without saying how it ended) counts as a
/// failed one (docs/runtime.md, "Retries": at least once, up to `retries + 1` attempts). The first retry waits the job's backoff, each later one twice the one before, capped
/// at [`MAX_BACKOFF`], plus up to a fifth of that wait as jitter, so that jobs that failed together
/// (a database down at midnight) do not all come back at one instant. The jitter is taken from the
/// run's id and attempt: spread across runs, and the same wherever it is computed.
pub(crate) fn retry_after(
    retry: Retries,
    attempt: u32,
    outcome: Outcome,
    run_id: i64,
) -> Option<Duration> {
    let failed = matches!(
        outcome,
        Outcome::Failed | Outcome::Panicked | Outcome::TimedOut | Outcome::Abandoned
    );
    if !failed || attempt == 0 || attempt > retry.retries {
        return None;
    }
    let doubling = 1u32 << (attempt - 1).min(20);
    let wait = retry
        .backoff
        .saturating_mul(doubling)
        .min(MAX_BACKOFF.max(retry.backoff));
    Some(wait + wait.mul_f64(0.2 * spread(run_id, attempt)))
}

/// A number in `[0, 1)` that depends on the run and attempt only (SplitMix64's finalizer).
fn spread(run_id: i64, attempt: u32) -> f64 {
    let mut x = (run_id as u64) ^ (u64::from(attempt) << 48);
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thrice() -> Retries {
        Retries {
            retries: 3,
            backoff: Duration::from_secs(30),
        }
    }

    #[test]
    fn waits_double_from_the_backoff_with_at_most_a_fifth_of_jitter() {
        for run_id in 1..200 {
            for (attempt, base) in [(1, 30), (2, 60), (3, 120)] {
                let wait = retry_after(thrice(), attempt, Outcome::Failed, run_id).unwrap();
                let base = Duration::from_secs(base);
                assert!(
                    wait >= base && wait < base + base / 5,
                    "{attempt}: {wait:?}"
                );
            }
        }
    }

    #[test]
    fn the_last_attempt_and_other_outcomes_are_not_retried() {
        assert_eq!(retry_after(thrice(), 4, Outcome::Failed, 7), None);
        for outcome in [Outcome::Succeeded, Outcome::Cancelled, Outcome::Skipped] {
            assert_eq!(retry_after(thrice(), 1, outcome, 7), None);
        }
        for outcome in [
            Outcome::Failed,
            Outcome::Panicked,
            Outcome::TimedOut,
            Outcome::Abandoned,
        ] {
            assert!(retry_after(thrice(), 1, outcome, 7).is_some());
        }
        assert_eq!(retry_after(Retries::default(), 1, Outcome::Failed, 7), None);
    }

    #[test]
    fn the_wait_is_capped_at_an_hour() {
        let retry = Retries {
            retries: 100,
            backoff: Duration::from_secs(600),
        };
        let wait = retry_after(retry, 30, Outcome::Failed, 7).unwrap();
        assert!(wait >= MAX_BACKOFF && wait < MAX_BACKOFF + MAX_BACKOFF / 5);
    }

    #[test]
    fn the_jitter_spreads_runs() {
        let waits: std::collections::HashSet<Duration> = (1..50)
            .map(|run_id| retry_after(thrice(), 1, Outcome::Failed, run_id).unwrap())
            .collect();
        assert!(waits.len() > 40);
    }
}
