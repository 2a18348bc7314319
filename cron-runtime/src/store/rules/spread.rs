//! How a deployment's runs are spread over its live replicas (docs/runtime.md, "How work is
//! spread"), decided once for every store: each occurrence of a job has one owner among the live
//! replicas ([`Spread::owns`]). A finish chains a job's next occurrence only to its owner, and a claim
//! takes a row before its start only when it owns the row's occurrence, or once the row is
//! [`GRACE`] past its start ([`Spread::may_take`]), so that the share of a replica that died or is
//! slow is never lost.
//!
//! The owner of a job's occurrence is the replica of rank `(job id + turn) mod N` among the `N` live
//! replicas sorted by id, where the turn counts the [`ROTATION`]s since the epoch: a job stays with one
//! replica for a rotation, so that its finishes keep chaining its every-second occurrences, and moves to
//! the next one after it, so that over a few rotations a job due more often than the others spreads
//! too. Every job moves at the same instant, once a rotation: the jobs that change hands then go back
//! to idle together and their new owners claim them in one batch each, where jobs moving a few at a
//! time would cost every replica a claim every second (docs/benchmarks.md, "Work spread over the
//! replicas"). Job ids of one deployment are consecutive: at any instant the jobs split over the
//! replicas by count within one.
//!
//! The database stores compute the same owner in SQL (`store/sql/claimable.rs`, `owned_occurrence!`);
//! the conformance suite pins the two to each other (`cron-runtime/tests/conformance/spread.rs`).

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How long a job's occurrences stay with one replica before they move to the next.
pub(crate) const ROTATION: Duration = Duration::from_secs(60);

/// How long after its start a due row that another replica owns may be taken by any replica: its
/// owner claims it ahead of its start (the claim-ahead, 500 ms by default), so this passes only when
/// the owner is gone, frozen or too busy to claim.
pub(crate) const GRACE: Duration = Duration::from_millis(500);

/// How old a replica's reading of the live replicas may be when it claims or chains: older, the claim
/// or the finish reads them again first (besides every heartbeat), so that a replica that joined or
/// left is counted within about a second by the replicas that run anything, at one statement a second
/// at most.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// A replica's place among the live replicas of its deployment, as its last heartbeat (or its
/// registration) saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spread {
    /// Its position among the live replicas sorted by id, from 0.
    pub(crate) rank: i64,
    /// How many replicas of its deployment are live, itself included.
    pub(crate) replicas: i64,
}

impl Default for Spread {
    fn default() -> Self {
        Spread::ALONE
    }
}

impl Spread {
    /// The only replica: it owns every occurrence.
    pub(crate) const ALONE: Spread = Spread {
        rank: 0,
        replicas: 1,
    };

    /// Runner `runner` among the live replicas `live` of its deployment (ids, in any order). A
    /// runner counts itself in even when its own heartbeat is not among them.
    pub(crate) fn among(runner: i64, live: &[i64]) -> Spread {
        let mut ids = live.to_vec();
        ids.push(runner);
        ids.sort_unstable();
        ids.dedup();
        let rank = ids.iter().position(|id| *id == runner).unwrap_or_default();
        Spread {
            rank: i64::try_from(rank).unwrap_or_default(),
            replicas: i64::try_from(ids.len()).unwrap_or(1),
        }
    }

    /// The slot of job `job_id`'s occurrence at `at`, before it is taken modulo the replicas: the job's
    /// id plus its turn, the [`ROTATION`]s since the epoch (`owned_occurrence!` in SQL).
    pub(crate) fn slot(job_id: i64, at: DateTime<Utc>) -> i64 {
        let rotation = i64::try_from(ROTATION.as_secs()).unwrap_or(i64::MAX);
        job_id + at.timestamp().div_euclid(rotation)
    }

    /// Whether this replica owns job `job_id`'s occurrence at `at`.
    pub(crate) fn owns(&self, job_id: i64, at: DateTime<Utc>) -> bool {
        Spread::slot(job_id, at).rem_euclid(self.replicas.max(1)) == self.rank
    }

    /// Whether a claim at `now` may take job `job_id`'s occurrence at `at`, due to start at `start`: its
    /// owner may (ahead of its start too), and any replica once it is [`GRACE`] past its start.
    pub(crate) fn may_take(
        &self,
        job_id: i64,
        at: DateTime<Utc>,
        start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        self.owns(job_id, at) || start + GRACE <= now
    }

    /// When job `job_id`'s occurrence at `at`, due to start at `start`, is due to a claim that looks
    /// `ahead`, as the instant a claim's `next_due` names (the executor claims `ahead` of it): its
    /// start for its owner; for the others [`GRACE`] after it, and `ahead` later again, since their
    /// claims may take it only once the grace has passed, not `ahead` of that. Naming the grace's end
    /// alone would wake a replica that owns nothing due `ahead` too early, to claim nothing and be
    /// told the same instant again until then: a claim in a loop.
    pub(crate) fn due_at(
        &self,
        job_id: i64,
        at: DateTime<Utc>,
        start: DateTime<Utc>,
        ahead: Duration,
    ) -> DateTime<Utc> {
        if self.owns(job_id, at) {
            start
        } else {
            start + Spread::others_wait(ahead)
        }
    }

    /// How long after its start another replica's occurrence is due to this one's claim that looks
    /// `ahead` ([`Spread::due_at`]): the grace, and the claim-ahead.
    pub(crate) fn others_wait(ahead: Duration) -> Duration {
        GRACE + ahead
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 10, 0, s).unwrap()
    }

    #[test]
    fn a_replica_ranks_among_the_live_ones_by_id_counting_itself_in() {
        assert_eq!(
            Spread::among(7, &[9, 3, 7]),
            Spread {
                rank: 1,
                replicas: 3
            }
        );
        assert_eq!(
            Spread::among(7, &[9, 3]),
            Spread {
                rank: 1,
                replicas: 3
            }
        );
        assert_eq!(Spread::among(7, &[]), Spread::ALONE);
    }

    #[test]
    fn every_occurrence_has_exactly_one_owner_and_jobs_split_within_one() {
        let replicas: Vec<Spread> = (0..4).map(|rank| Spread { rank, replicas: 4 }).collect();
        for second in [0, 17, 59] {
            let mut counts = [0; 4];
            for job in 1..=203 {
                let owners: Vec<usize> = (0..4)
                    .filter(|r| replicas[*r].owns(job, at(second)))
                    .collect();
                let [owner] = owners[..] else {
                    panic!("job {job} at {second}: owners {owners:?}")
                };
                counts[owner] += 1;
            }
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(max - min <= 1, "{counts:?}");
        }
    }

    #[test]
    fn a_job_stays_with_its_owner_for_a_rotation_then_moves_to_the_next() {
        let n = 4;
        let job = 5;
        let owner = |t: DateTime<Utc>| Spread::slot(job, t).rem_euclid(n);
        // The start of a minute: every job's rotation.
        let start = at(0) + chrono::TimeDelta::seconds(60 - at(0).timestamp().rem_euclid(60));
        let first = owner(start);
        for s in 0..60 {
            assert_eq!(owner(start + chrono::TimeDelta::seconds(s)), first);
        }
        assert_eq!(
            owner(start + chrono::TimeDelta::seconds(60)),
            (first + 1) % n
        );
        assert_eq!(
            owner(start - chrono::TimeDelta::seconds(1)),
            (first + n - 1) % n
        );
    }

    #[test]
    fn another_replicas_occurrence_is_taken_only_past_the_grace() {
        let spread = Spread {
            rank: 0,
            replicas: 2,
        };
        let job = (1..).find(|j| !spread.owns(*j, at(30))).unwrap();
        let start = at(30);
        assert!(!spread.may_take(
            job,
            start,
            start,
            start - chrono::TimeDelta::milliseconds(400)
        ));
        assert!(!spread.may_take(
            job,
            start,
            start,
            start + chrono::TimeDelta::milliseconds(499)
        ));
        assert!(spread.may_take(
            job,
            start,
            start,
            start + chrono::TimeDelta::milliseconds(500)
        ));
        // Due to a claim that looks half a second ahead once the grace has passed: named half a
        // second later, as the executor claims that much ahead of the instant named.
        let ahead = Duration::from_millis(500);
        assert_eq!(
            spread.due_at(job, start, start, ahead),
            start + chrono::TimeDelta::milliseconds(1_000)
        );
        assert!(spread.may_take(
            job,
            start,
            start,
            spread.due_at(job, start, start, ahead) - chrono::TimeDelta::milliseconds(500)
        ));
        let mine = (1..).find(|j| spread.owns(*j, at(30))).unwrap();
        assert!(spread.may_take(
            mine,
            start,
            start,
            start - chrono::TimeDelta::milliseconds(400)
        ));
        assert_eq!(spread.due_at(mine, start, start, ahead), start);
    }
}
