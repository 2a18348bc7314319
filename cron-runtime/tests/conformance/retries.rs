//! Retries: a failed attempt asked to be tried again is recorded, its job held until the retry, which a
//! claim takes at its instant as the next attempt of the same run; a retry that cannot start before the
//! next occurrence ends the occurrence failed (docs/runtime.md, "Retries").

use std::time::Duration;

use cron_runtime::store::{RETRIES_CUT_SHORT, Retries, Store};

use super::*;

/// The first claim of a [`TEN_SECONDLY`] job `verb`: waits for its occurrence.
async fn first_attempt<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
    verb: &str,
) -> Claim {
    let at = h.next_execution(MODULE, verb).await.unwrap();
    sleep_until(h, at + ms(50)).await;
    let claimed = claim(store, runner).await;
    let claim = claim_of(&claimed, verb).clone();
    assert_eq!((claim.attempt, claim.retry_at), (1, None));
    assert_eq!(claim.start_at(), claim.scheduled_at);
    claim
}

fn retried(claim: &Claim, after: Duration) -> Finish {
    Finish {
        retry_after: Some(after),
        ..ended(claim, Outcome::Failed, Some("relay refused"))
    }
}

pub async fn a_failed_attempt_is_retried_at_its_instant_as_the_same_run(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let first = first_attempt(&h, &store, &runner, "a").await;
    let ended_at = first.scheduled_at + ms(100);
    sleep_until(&h, ended_at + ms(50)).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        ..retried(&first, Duration::from_secs(1))
    };
    let retry_at = ended_at + ms(1_000);
    assert_eq!(
        finish_one(&store, &runner, &finish).await,
        Finished::Retrying { at: retry_at }
    );
    // Held: idle at the retry's instant, which no claim takes before it.
    assert_eq!(h.next_execution(MODULE, "a").await, Some(retry_at));
    let pending = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(pending.outcome, None, "{pending:?}");
    assert_eq!(pending.attempts.len(), 1);
    assert_eq!(pending.attempts[0].outcome, Outcome::Failed);
    assert_eq!(pending.attempts[0].error.as_deref(), Some("relay refused"));
    assert_eq!(pending.attempts[0].finished_at, ended_at);
    assert!(claim(&store, &runner).await.claims.is_empty());

    // Another replica takes it (past the grace, whoever owns it), as the second attempt of the same
    // run.
    let (other, other_runner) = replica(&h, &spec).await;
    sleep_until(&h, retry_at + past_the_grace()).await;
    let claimed = claim(&other, &other_runner).await;
    let second = claim_of(&claimed, "a");
    assert_eq!(second.run_id, first.run_id);
    assert_eq!(second.scheduled_at, first.scheduled_at);
    assert_eq!((second.attempt, second.retry_at), (2, Some(retry_at)));
    assert!(!second.late);
    assert!(claim(&store, &runner).await.claims.is_empty());
    let finished = finish_one(&other, &other_runner, &succeeded(second)).await;
    let next = first.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(
        finished,
        Finished::Recorded {
            next_execution: Some(next),
            skipped: 0
        }
    );
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(run.error, None);
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Succeeded]);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
}

pub async fn a_retry_due_after_the_next_occurrence_ends_the_occurrence_failed(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let first = first_attempt(&h, &store, &runner, "a").await;
    let next = first.scheduled_at + TimeDelta::seconds(10);
    let finished = finish_one(&store, &runner, &retried(&first, Duration::from_secs(30))).await;
    assert_eq!(
        finished,
        Finished::Recorded {
            next_execution: Some(next),
            skipped: 0
        }
    );
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Failed));
    assert_eq!(run.error.as_deref(), Some(RETRIES_CUT_SHORT));
    assert_eq!(run.attempts.len(), 1);
    assert_eq!(run.attempts[0].error.as_deref(), Some("relay refused"));
}

pub async fn a_retry_claimed_after_the_next_occurrence_came_is_cut_short(h: impl StoreUnderTest) {
    // A job due every ten seconds whose retry nobody claimed in time (every replica was down): the
    // claim ends the occurrence failed and the job goes on at the occurrence that came.
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let first = first_attempt(&h, &store, &runner, "a").await;
    let next = first.scheduled_at + TimeDelta::seconds(10);
    let finished = finish_one(&store, &runner, &retried(&first, Duration::from_secs(8))).await;
    let Finished::Retrying { at: retry_at } = finished else {
        panic!("{finished:?}")
    };
    assert!(retry_at < next);
    sleep_until(&h, next + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    // The occurrence that came is claimed (late or not, by the job's policy); the retry is not.
    assert!(claimed.claims.iter().all(|c| c.run_id != first.run_id));
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Failed));
    assert_eq!(run.error.as_deref(), Some(RETRIES_CUT_SHORT));
    // The occurrence that came runs, in this claim or the next.
    let mut taken: Vec<DateTime<Utc>> = claimed.claims.iter().map(|c| c.scheduled_at).collect();
    taken.extend(
        claim(&store, &runner)
            .await
            .claims
            .iter()
            .map(|c| c.scheduled_at),
    );
    assert_eq!(taken, [next]);
}

/// A replica of `billing@1` whose first attempt of `a` failed, with its retry (due at the instant
/// returned) claimed ahead: the replica, the first attempt's claim and the retry's.
async fn a_retry_claimed_ahead<H: StoreUnderTest>(
    h: &H,
) -> (H::Store, Runner, Claim, Claim, DateTime<Utc>) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(h, &spec).await;
    let first = first_attempt(h, &store, &runner, "a").await;
    let finished = finish_one(&store, &runner, &retried(&first, Duration::from_secs(3))).await;
    let Finished::Retrying { at: retry_at } = finished else {
        panic!("{finished:?}")
    };
    sleep_until(h, retry_at - ms(1_500)).await;
    let claimed = store
        .claim_due(&runner, Duration::from_secs(2), 100)
        .await
        .unwrap();
    let second = claim_of(&claimed, "a").clone();
    assert_eq!((second.attempt, second.retry_at), (2, Some(retry_at)));
    (store, runner, first, second, retry_at)
}

pub async fn a_retry_claimed_ahead_and_given_back_is_pending_again(h: impl StoreUnderTest) {
    let (store, runner, first, second, retry_at) = a_retry_claimed_ahead(&h).await;
    store.give_back(&runner, &[second.run_id]).await.unwrap();
    assert_eq!(h.next_execution(MODULE, "a").await, Some(retry_at));
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!((run.outcome, run.attempts.len()), (None, 1));
    sleep_until(&h, retry_at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let again = claim_of(&claimed, "a");
    assert_eq!((again.run_id, again.attempt), (first.run_id, 2));
}

pub async fn a_retry_claimed_ahead_and_given_back_after_a_takeover_is_pending_under_the_active_deployment(
    h: impl StoreUnderTest,
) {
    // A replica claimed a retry ahead of its instant, a new deployment took the module over, and the
    // replica gives the retry back at its shutdown: the retry goes with its verb to the active
    // deployment's row, at its instant, where the new deployment's replicas take it as the same run's
    // next attempt; left on the replaced row, nothing would ever claim it and the run would stay
    // `running` for good.
    retry_given_back_after_a_takeover(h, Stop::GiveBack).await;
}

pub async fn a_retry_claimed_ahead_by_a_replaced_deployment_stopping_goes_to_the_active_deployment(
    h: impl StoreUnderTest,
) {
    // The same through a shutdown: the replaced deployment's replica deregisters while the retry it
    // claimed ahead has not started (its instant still ahead), so it is given back, to the active
    // deployment's row (G9, docs/operations.md; docs/runtime.md, "Retries").
    retry_given_back_after_a_takeover(h, Stop::Deregister).await;
}

/// How the replaced deployment's replica lets go of the retry it claimed ahead.
enum Stop {
    GiveBack,
    Deregister,
}

/// A retry claimed ahead, then a takeover, then the replaced replica lets go of it (`stop`): the new
/// deployment's replica takes it at its instant as the same run's next attempt.
async fn retry_given_back_after_a_takeover(h: impl StoreUnderTest, stop: Stop) {
    let (store, runner, first, second, retry_at) = a_retry_claimed_ahead(&h).await;
    let v2 = deployment("billing@2", vec![job("a", TEN_SECONDLY)]);
    let (new, runner2) = replica(&h, &v2).await;
    match stop {
        Stop::GiveBack => store.give_back(&runner, &[second.run_id]).await.unwrap(),
        Stop::Deregister => store.deregister(&runner, &[]).await.unwrap(),
    }
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!((run.outcome, run.attempts.len()), (None, 1), "{run:?}");
    sleep_until(&h, retry_at + ms(50)).await;
    let claimed = claim(&new, &runner2).await;
    let again = claim_of(&claimed, "a");
    assert_eq!((again.run_id, again.attempt), (first.run_id, 2));
}

pub async fn a_takeover_carries_a_pending_retry_or_cuts_it_short(h: impl StoreUnderTest) {
    // A takeover moves a pending retry to the new deployment's row of its verb, at its instant, where
    // the new deployment's replicas take it; a deployment without the verb ends the occurrence failed,
    // its retries cut short.
    // Due every ten seconds: the takeover and the retry's claim come before the next occurrence,
    // which would cut the retry short, however slow the store is (due every second, a takeover that
    // takes most of a second leaves the retry's claim after it).
    let (store, runner) = replica(&h, &deployment("billing@1", vec![job("a", TEN_SECONDLY)])).await;
    let first = first_attempt(&h, &store, &runner, "a").await;
    let finished = finish_one(
        &store,
        &runner,
        &retried(&first, Duration::from_millis(200)),
    )
    .await;
    let Finished::Retrying { at: retry_at } = finished else {
        panic!("{finished:?}")
    };

    let v2 = deployment("billing@2", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (new, runner2) = replica(&h, &v2).await;
    assert_eq!(h.next_execution(MODULE, "a").await, Some(retry_at));
    assert_eq!(run_of(&h, first.run_id).await.unwrap().outcome, None);
    sleep_until(&h, retry_at + ms(50)).await;
    assert!(claim(&store, &runner).await.claims.is_empty(), "superseded");
    let claimed = claim(&new, &runner2).await;
    let second = claim_of(&claimed, "a").clone();
    assert_eq!((second.run_id, second.attempt), (first.run_id, 2));
    let finished = finish_one(
        &new,
        &runner2,
        &retried(&second, Duration::from_millis(200)),
    )
    .await;
    assert!(
        matches!(finished, Finished::Retrying { .. }),
        "{finished:?}"
    );

    replica(&h, &deployment("billing@3", vec![job("b", YEARLY)])).await;
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Failed), "{run:?}");
    let error = run.error.unwrap();
    // One text on every store (rules::take_over): the prefix, and why.
    assert!(
        error.starts_with(RETRIES_CUT_SHORT)
            && error.contains("took the module over has no verb `a`"),
        "{error}"
    );
    assert_eq!(run.attempts.len(), 2);
}

/// A [`TEN_SECONDLY`] job `verb` that tries a failed attempt `retries` more times, the first after a
/// second.
fn retrying(verb: &str, retries: u32) -> JobSpec {
    JobSpec {
        retry: Retries {
            retries,
            backoff: Duration::from_secs(1),
        },
        ..job(verb, TEN_SECONDLY)
    }
}

/// The second attempt of `a` ([`retrying`]), claimed at its instant by the replica `store` with a lease
/// of two seconds after the first attempt failed: the first claim and the second.
async fn a_second_attempt<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
) -> (Claim, Claim) {
    let first = first_attempt(h, store, runner, "a").await;
    let finished = finish_one(store, runner, &retried(&first, Duration::from_secs(1))).await;
    let Finished::Retrying { at: retry_at } = finished else {
        panic!("{finished:?}")
    };
    sleep_until(h, retry_at + ms(50)).await;
    let claimed = claim(store, runner).await;
    let second = claim_of(&claimed, "a").clone();
    assert_eq!((second.run_id, second.attempt), (first.run_id, 2));
    (first, second)
}

pub async fn a_run_taken_back_with_retries_left_is_retried_as_its_next_attempt(
    h: impl StoreUnderTest,
) {
    // docs/runtime.md, "Retries": an attempt whose replica died (it stopped renewing its lease) is a
    // failed attempt. With retries left, the occurrence is tried again after the backoff (doubled for
    // a second retry), on any replica, as the same run's next attempt; the attempt taken back is
    // listed `abandoned`.
    let spec = deployment("billing@1", vec![retrying("a", 3)]);
    let (dies, r1) = replica_with(&h, short_lease(), &spec).await;
    let (first, second) = a_second_attempt(&h, &dies, &r1).await;
    // The live replica joins once the other holds both attempts (with two, either may own them).
    let (alive, r2) = replica(&h, &spec).await;

    // The replica running attempt 2 dies; its lease runs out; the live replica takes the run back.
    sleep_until(&h, second.lease_expires_at + ms(500)).await;
    let taken_back = h.now().await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["a"], "{beat:?}");
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, None, "waits for its retry: {run:?}");
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Abandoned], "{run:?}");
    assert!(
        run.attempts[1].error.as_deref().unwrap().contains("lease"),
        "{run:?}"
    );
    // Held for the retry: the second retry waits twice the backoff, plus up to a fifth as jitter.
    let retry_at = h.next_execution(MODULE, "a").await.expect("idle, held");
    let waited = retry_at - run.attempts[1].finished_at;
    assert!(
        ms(2_000) <= waited && waited <= ms(2_400),
        "{waited:?} after the attempt taken back ({taken_back})"
    );
    assert!(claim(&alive, &r2).await.claims.is_empty());

    // The live replica takes it at its instant (past the grace: the replica that died still counts as
    // live within the other's lease, and may own it), as attempt 3 of the same run, and it succeeds.
    sleep_until(&h, retry_at + past_the_grace()).await;
    let claimed = claim(&alive, &r2).await;
    let third = claim_of(&claimed, "a");
    assert_eq!(
        (third.run_id, third.attempt, third.retry_at),
        (first.run_id, 3, Some(retry_at))
    );
    let finished = finish_one(&alive, &r2, &succeeded(third)).await;
    let next = first.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(
        finished,
        Finished::Recorded {
            next_execution: Some(next),
            skipped: 0
        }
    );
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Succeeded), "{run:?}");
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Failed, Outcome::Abandoned, Outcome::Succeeded]
    );
    // The next occurrence runs as usual.
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
}

pub async fn a_run_taken_back_with_no_retries_left_ends_abandoned(h: impl StoreUnderTest) {
    // Its last allowed attempt taken back: the occurrence ends `abandoned`, with every attempt listed,
    // and the job goes on at its next occurrence.
    let spec = deployment("billing@1", vec![retrying("a", 1)]);
    let (dies, r1) = replica_with(&h, short_lease(), &spec).await;
    let (first, second) = a_second_attempt(&h, &dies, &r1).await;
    // The live replica joins once the other holds both attempts (with two, either may own them).
    let (alive, r2) = replica(&h, &spec).await;
    sleep_until(&h, second.lease_expires_at + ms(500)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["a"], "{beat:?}");
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Abandoned), "{run:?}");
    assert!(run.error.as_deref().unwrap().contains("lease"), "{run:?}");
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Abandoned], "{run:?}");
    let next = first.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
}

pub async fn a_retry_pending_when_its_replica_stops_stays_pending(h: impl StoreUnderTest) {
    // docs/runtime.md, "Retries": a graceful stop leaves a pending retry to the others, or to the
    // next start. `b`'s attempt, which the stopping replica held without saying how it ended, is taken
    // back as a crashed one is: with retries left, it is retried.
    let spec = deployment("billing@1", vec![retrying("a", 3), retrying("b", 3)]);
    let (stops, r1) = replica(&h, &spec).await;
    let first = first_attempt(&h, &stops, &r1, "a").await;
    let finished = finish_one(&stops, &r1, &retried(&first, Duration::from_secs(3))).await;
    let Finished::Retrying { at: retry_at } = finished else {
        panic!("{finished:?}")
    };
    // `b`, due with `a`, was claimed with it and is still running.
    let b = h
        .runs()
        .await
        .into_iter()
        .find(|r| r.verb == "b" && r.outcome.is_none())
        .expect("`b` was claimed with `a`")
        .run_id;

    stops.deregister(&r1, &[]).await.unwrap();
    assert_eq!(h.next_execution(MODULE, "a").await, Some(retry_at));
    let run = run_of(&h, first.run_id).await.unwrap();
    assert_eq!((run.outcome, run.attempts.len()), (None, 1), "{run:?}");
    let run_b = run_of(&h, b).await.unwrap();
    assert_eq!(run_b.outcome, None, "`b` waits for its retry: {run_b:?}");
    let outcomes: Vec<Outcome> = run_b.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Abandoned], "{run_b:?}");

    // Another replica (or the same one, started again) takes both as their second attempts.
    let (other, r2) = replica(&h, &spec).await;
    let b_at = h
        .next_execution(MODULE, "b")
        .await
        .expect("held for its retry");
    sleep_until(&h, retry_at.max(b_at) + ms(50)).await;
    let claimed = claim(&other, &r2).await;
    let again = claim_of(&claimed, "a");
    assert_eq!((again.run_id, again.attempt), (first.run_id, 2));
    let again_b = claim_of(&claimed, "b");
    assert_eq!((again_b.run_id, again_b.attempt), (b, 2));
}
