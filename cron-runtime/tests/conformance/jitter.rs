//! Jitter (docs/runtime.md, "Jitter"): a regular occurrence of a jittered job is claimed when it is due
//! to start, its instant plus the job's fixed offset, and recorded as the occurrence of its instant; it
//! is late from its start; a retry starts at its own instant; and the occurrence keeps its identity
//! across a deploy that changes the jitter.

use std::ops::Range;
use std::time::Duration;

use cron_runtime::store::{ClaimAction, Finishing, Retries, Store};

use super::*;

/// A job of `expression` with `jitter`, named `{prefix}_{i}` for the first `i` whose offset (in
/// milliseconds) lies in `offsets`, with that offset: the case picks where in the jitter its job starts,
/// from the one hash the stores use ([`cron_schema::jitter_offset`]).
pub fn jittered(
    prefix: &str,
    expression: &str,
    jitter: Duration,
    offsets: Range<u64>,
) -> (JobSpec, Duration) {
    (0..)
        .map(|i| format!("{prefix}_{i}"))
        .find_map(|verb| {
            let offset = cron_schema::jitter_offset(MODULE, &verb, jitter);
            offsets
                .contains(&u64::try_from(offset.as_millis()).unwrap())
                .then(|| {
                    let job = JobSpec {
                        jitter: Some(jitter),
                        ..job(&verb, expression)
                    };
                    (job, offset)
                })
        })
        .unwrap()
}

fn delta(offset: Duration) -> TimeDelta {
    TimeDelta::from_std(offset).unwrap()
}

pub async fn a_jittered_occurrence_is_claimed_at_its_start_and_recorded_at_its_instant(
    h: impl StoreUnderTest,
) {
    let jitter = Duration::from_secs(3);
    // `spread` starts 2 to 2.5 s after its instant; `soon`, due a second later, 0 to 0.4 s after its
    // own: the earliest start is `soon`'s, though `spread` is due first.
    let (spread, offset) = jittered("spread", TEN_SECONDLY, jitter, 2000..2500);
    let (soon, soon_offset) = jittered("soon", "1/10 * * * * *", jitter, 0..400);
    let spread_verb = spread.verb.clone();
    let spec = deployment("billing@1", vec![spread, soon, job("plain", TEN_SECONDLY)]);
    // Registered well before the occurrence: at a second ending in 2, for the one ending in 0.
    settle_where(&h, |s| s % 10 == 2).await;
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, &spread_verb).await.unwrap();
    // The occurrence keeps its instant: the row is at it, as a job without jitter is.
    assert_eq!(h.next_execution(MODULE, "plain").await, Some(at));
    let start = at + delta(offset);
    let soon_start = at + TimeDelta::seconds(1) + delta(soon_offset);

    // At its instant, only the job without jitter is due; the store says when the next one starts.
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(verbs(&claimed), ["plain"]);
    assert_eq!(claimed.next_due, Some(soon_start));
    assert!(claim(&store, &runner).await.claims.is_empty());

    // Claimed ahead of its start, it starts and holds its lease from there, as the run of its instant.
    sleep_until(&h, start - ms(500)).await;
    let claimed = claim_ahead(&store, &runner).await;
    let taken = claim_of(&claimed, &spread_verb).clone();
    assert_eq!(
        (
            taken.scheduled_at,
            taken.start_at(),
            taken.late,
            taken.action
        ),
        (at, start, false, ClaimAction::Run)
    );
    assert_eq!(taken.jitter_offset, offset);
    assert_eq!(taken.lease_expires_at, start + TimeDelta::seconds(30));
    assert!(
        claim_ahead(&store, &runner)
            .await
            .claims
            .iter()
            .all(|c| c.verb != spread_verb),
        "claimed twice"
    );
    let run = run_of(&h, taken.run_id).await.unwrap();
    assert_eq!(
        (run.scheduled_at, run.started_at, run.manual),
        (at, Some(start), false)
    );
    // It goes on at its next instant, not at its next start.
    sleep_until(&h, start + ms(100)).await;
    assert_eq!(
        finish_one(&store, &runner, &succeeded(&taken)).await,
        Finished::Recorded {
            next_execution: Some(at + TimeDelta::seconds(10)),
            skipped: 0
        }
    );
}

pub async fn a_jittered_occurrence_is_late_from_its_start(h: impl StoreUnderTest) {
    let jitter = Duration::from_secs(3);
    // Under `skip`, with a tolerance of a second: `spread` is claimed 2.95 s after its instant but
    // less than a second after its start, on time; `early` more than a second after its start, late.
    let (spread, _) = jittered("spread", TEN_SECONDLY, jitter, 2000..2900);
    let (early, _) = jittered("early", TEN_SECONDLY, jitter, 0..400);
    let (spread_verb, early_verb) = (spread.verb.clone(), early.verb.clone());
    let spec = deployment("billing@1", vec![skipping(spread), skipping(early)]);
    settle_where(&h, |s| s % 10 == 2).await;
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, &spread_verb).await.unwrap();
    sleep_until(&h, at + ms(2950)).await;
    let claimed = claim(&store, &runner).await;
    let on_time = claim_of(&claimed, &spread_verb);
    assert_eq!(
        (on_time.scheduled_at, on_time.late, on_time.action),
        (at, false, ClaimAction::Run)
    );
    let late = claim_of(&claimed, &early_verb);
    assert_eq!(
        (late.scheduled_at, late.late, late.action),
        (at, true, ClaimAction::Skipped)
    );
    // Skipped to the occurrence after now, at its instant.
    assert_eq!(
        h.next_execution(MODULE, &early_verb).await,
        Some(at + TimeDelta::seconds(10))
    );
}

pub async fn a_retry_of_a_jittered_job_starts_at_its_retry_instant(h: impl StoreUnderTest) {
    let jitter = Duration::from_secs(3);
    let (spread, offset) = jittered("spread", TEN_SECONDLY, jitter, 1000..2000);
    let verb = spread.verb.clone();
    let spread = JobSpec {
        retry: Retries {
            retries: 1,
            backoff: Duration::from_secs(1),
        },
        ..spread
    };
    let spec = deployment("billing@1", vec![spread]);
    settle_where(&h, |s| s % 10 == 2).await;
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, &verb).await.unwrap();
    let start = at + delta(offset);
    sleep_until(&h, start + ms(50)).await;
    let first = claim_of(&claim(&store, &runner).await, &verb).clone();
    assert_eq!((first.scheduled_at, first.start_at()), (at, start));

    let ended_at = start + ms(100);
    sleep_until(&h, ended_at + ms(50)).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        retry_after: Some(Duration::from_secs(1)),
        ..ended(&first, Outcome::Failed, Some("relay refused"))
    };
    let retry_at = ended_at + ms(1_000);
    assert_eq!(
        finish_one(&store, &runner, &finish).await,
        Finished::Retrying { at: retry_at }
    );
    // Due at the retry's instant, without the offset: claimed then, not an offset later.
    sleep_until(&h, retry_at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.next_due, None, "{claimed:?}");
    let second = claim_of(&claimed, &verb);
    assert_eq!(
        (
            second.run_id,
            second.scheduled_at,
            second.attempt,
            second.start_at()
        ),
        (first.run_id, at, 2, retry_at)
    );
    assert_eq!(second.jitter_offset, Duration::ZERO);
    assert!(second.lease_expires_at <= retry_at + TimeDelta::seconds(31));
}

pub async fn changing_the_jitter_at_a_deploy_runs_no_occurrence_twice(h: impl StoreUnderTest) {
    let jitter = Duration::from_secs(3);
    // Under the first deployment `kept` and `moved` start 1 to 2 s after their instant; the second
    // changes `kept`'s jitter, and `moved`'s schedule and jitter, so that its first occurrence is one
    // the first deployment's run holds.
    let (kept, offset) = jittered("kept", TEN_SECONDLY, jitter, 1000..2000);
    let (moved, moved_offset) = jittered("moved", TEN_SECONDLY, jitter, 1000..2000);
    let (kept_verb, moved_verb) = (kept.verb.clone(), moved.verb.clone());
    let v1 = deployment("billing@1", vec![kept, moved]);
    let v2 = deployment(
        "billing@2",
        vec![
            JobSpec {
                jitter: Some(Duration::from_secs(4)),
                ..job(&kept_verb, TEN_SECONDLY)
            },
            JobSpec {
                jitter: Some(Duration::from_secs(4)),
                ..job(&moved_verb, "*/5 * * * * *")
            },
        ],
    );
    settle_where(&h, |s| s % 10 == 7).await;
    let (old, r1) = replica(&h, &v1).await;
    let at = h.next_execution(MODULE, &kept_verb).await.unwrap();
    // The first deployment claims both ahead of their starts, before their instant.
    sleep_until(&h, at - ms(500)).await;
    let claimed = old
        .claim_due(&r1, Duration::from_millis(3_500), 100)
        .await
        .unwrap();
    let kept_run = claim_of(&claimed, &kept_verb).clone();
    let moved_run = claim_of(&claimed, &moved_verb).clone();
    assert_eq!(
        (kept_run.scheduled_at, kept_run.start_at()),
        (at, at + delta(offset))
    );
    assert_eq!(moved_run.start_at(), at + delta(moved_offset));

    // The second deployment takes over while they wait to start; they run, under the first.
    let (new, r2) = replica(&h, &v2).await;
    sleep_until(&h, at + ms(2_100)).await;
    let Finishing { results, .. } = old
        .finish(&r1, &[succeeded(&kept_run), succeeded(&moved_run)], None)
        .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    // Whatever the second deployment's rows say, the occurrence at `at` has run: neither job runs it
    // again, whatever its new offset.
    sleep_until(&h, at + ms(4_500)).await;
    let again = new
        .claim_due(&r2, Duration::from_secs(1), 100)
        .await
        .unwrap();
    assert!(
        again.claims.iter().all(|c| c.scheduled_at != at),
        "{again:?}"
    );
    for verb in [&kept_verb, &moved_verb] {
        let runs: Vec<RunView> = h
            .runs()
            .await
            .into_iter()
            .filter(|r| r.verb == *verb && r.scheduled_at == at)
            .collect();
        assert_eq!(
            runs.len(),
            1,
            "`{verb}` ran {at} {} times: {runs:?}",
            runs.len()
        );
    }
    // Both go on past it: `kept` at its next instant, `moved` at the first of its new schedule after.
    let kept_next = h.next_execution(MODULE, &kept_verb).await;
    let moved_next = h.next_execution(MODULE, &moved_verb).await;
    let claimed_next = |verb: &str| {
        again
            .claims
            .iter()
            .find(|c| c.verb == verb)
            .map(|c| c.scheduled_at)
    };
    assert!(
        kept_next.or(claimed_next(&kept_verb)) > Some(at),
        "{kept_next:?}"
    );
    assert!(
        moved_next.or(claimed_next(&moved_verb)) > Some(at),
        "{moved_next:?}"
    );
}

pub async fn a_finish_chains_a_jittered_occurrence_by_its_start(h: impl StoreUnderTest) {
    // Due every two seconds, starting 0.9 to 1 s after each instant: the next instant is within the
    // executor's horizon of a second when a run ends, its start is not.
    let jitter = Duration::from_secs(1);
    let (tick, offset) = jittered("tick", "*/2 * * * * *", jitter, 900..1000);
    let verb = tick.verb.clone();
    let spec = deployment("billing@1", vec![tick]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, &verb).await.unwrap();
    let start = at + delta(offset);
    sleep_until(&h, start + ms(50)).await;
    let first = claim_of(&claim(&store, &runner).await, &verb).clone();
    let ended_at = start + ms(100);
    sleep_until(&h, ended_at).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        ..succeeded(&first)
    };
    let Finishing { claimed, .. } = store
        .finish(&runner, &[finish], Some(Duration::from_secs(1)))
        .await;
    assert!(
        claimed.as_ref().is_none_or(|c| c.claims.is_empty()),
        "chained before its start's horizon: {claimed:?}"
    );
    let next = at + TimeDelta::seconds(2);
    assert_eq!(h.next_execution(MODULE, &verb).await, Some(next));
    // Chained once its start is within the horizon, or claimed: at its start.
    let next_start = next + delta(offset);
    sleep_until(&h, next_start - ms(500)).await;
    let second = claim_of(&claim_ahead(&store, &runner).await, &verb).clone();
    assert_eq!((second.scheduled_at, second.start_at()), (next, next_start));
    let finish = Finish {
        ended_at: Some(next_start + ms(100)),
        ..succeeded(&second)
    };
    sleep_until(&h, next_start + ms(100)).await;
    // Ending 0.1 s after its start, the next start is 1.9 s on: within a horizon of 2 s, where a
    // chaining store claims it, at its start.
    let Finishing { claimed, .. } = store
        .finish(&runner, &[finish], Some(Duration::from_secs(2)))
        .await;
    let third = next + TimeDelta::seconds(2);
    match claimed {
        Some(chained) => {
            let [claim] = &chained.claims[..] else {
                panic!("one claim: {chained:?}")
            };
            assert_eq!(
                (claim.scheduled_at, claim.start_at()),
                (third, third + delta(offset))
            );
            assert!(claim.lease_expires_at >= third + delta(offset) + TimeDelta::seconds(30));
        }
        None => assert_eq!(h.next_execution(MODULE, &verb).await, Some(third)),
    }
}
