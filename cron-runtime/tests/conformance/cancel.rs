//! Cancelling a run in flight (`cronverb cancel`; docs/operations.md, "Cancelling a run"): the request
//! reaches the store's runs in flight (`Store::cancels`), the run ends `cancelled` with who asked,
//! whatever its finish says, its occurrence is not tried again although it asked to be, and the next
//! regular occurrence is due as usual; a cancel with nothing in flight is refused and audits nothing.

use std::time::Duration;

use cron_runtime::store::{Cancel, Store};

use super::*;
use crate::support::retried;

pub async fn a_cancelled_run_ends_cancelled_by_its_actor_and_is_not_retried(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner, run) = claimed_a(&h, &spec).await;
    assert!(store.cancels(&[run.run_id]).await.unwrap().is_empty());
    let operator = h.operator();
    let before = operator.audited("cancel").await;

    let asked = operator.cancel("a", "alice", Some("stuck export")).await;
    assert_eq!(asked, Ok(run.run_id));
    // The replica running it reads the request (at its wake-up, or its next renewal).
    assert_eq!(
        store.cancels(&[run.run_id, run.run_id + 1]).await.unwrap(),
        [Cancel {
            run_id: run.run_id,
            by: "alice".to_owned(),
            note: Some("stuck export".to_owned()),
        }]
    );
    assert_eq!(
        operator.audited("cancel").await,
        before.map(|n| n + 1),
        "one row of the audit trail"
    );

    // Its handler returned an error in its grace, and the executor asked for a retry: the operator's
    // cancel wins.
    let ended_at = run.scheduled_at + ms(200);
    sleep_until(&h, ended_at + ms(10)).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        retry_after: Some(Duration::from_secs(1)),
        ..ended(&run, Outcome::Failed, Some("interrupted"))
    };
    let next = run.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(
        finish_one(&store, &runner, &finish).await,
        Finished::Cancelled {
            next_execution: Some(next),
            skipped: 0
        },
        "recorded cancelled: no retry, although one was asked for"
    );
    let recorded = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Cancelled), "{recorded:?}");
    assert_eq!(
        recorded.error.as_deref(),
        Some("cancelled by alice: stuck export")
    );
    assert!(recorded.attempts.is_empty(), "{recorded:?}");
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));

    // The next occurrence runs as usual, and is not cancelled.
    sleep_until(&h, next + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let second = claim_of(&claimed, "a").clone();
    assert_eq!((second.scheduled_at, second.attempt), (next, 1));
    assert!(store.cancels(&[second.run_id]).await.unwrap().is_empty());
    finish_one(&store, &runner, &succeeded(&second)).await;
    let recorded = run_of(&h, second.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Succeeded), "{recorded:?}");
}

pub async fn a_cancel_with_no_run_in_flight_is_refused_and_audits_nothing(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let operator = h.operator();
    let before = operator.audited("cancel").await;
    let refused = operator.cancel("a", "alice", None).await.unwrap_err();
    assert_eq!(
        refused,
        "`a` has no run in flight: there is nothing to cancel"
    );
    // Nor once a manual run has ended.
    let requested_at = operator.trigger("a").await.unwrap();
    let claimed = claim(&store, &runner).await;
    let manual = claim_of(&claimed, "a").clone();
    assert_eq!(manual.scheduled_at, requested_at);
    finish_one(&store, &runner, &succeeded(&manual)).await;
    assert!(operator.cancel("a", "alice", None).await.is_err());
    assert_eq!(operator.audited("cancel").await, before);
    let recorded = run_of(&h, manual.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Succeeded), "{recorded:?}");
}

/// A [`TEN_SECONDLY`] job `a` tried three more times, a second apart.
fn retrying_a() -> JobSpec {
    retried(job("a", TEN_SECONDLY))
}

pub async fn a_cancelled_run_taken_back_from_its_replica_ends_cancelled_and_is_not_retried(
    h: impl StoreUnderTest,
) {
    // The replica running a cancelled run dies before it records the end: the live replica that takes
    // the run back ends it `cancelled` by the requester, not `abandoned` and retried.
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (dies, r1) = replica_with(&h, short_lease(), &spec).await;
    let (alive, r2) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Past the spread's grace, where either live replica takes the occurrence whoever owns it.
    sleep_until(&h, at + ms(600)).await;
    let claimed = claim(&dies, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    let asked = h.operator().cancel("a", "alice", Some("stuck")).await;
    assert_eq!(asked, Ok(run.run_id));

    sleep_until(&h, run.lease_expires_at + ms(500)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["a"], "{beat:?}");
    let recorded = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Cancelled), "{recorded:?}");
    assert_eq!(recorded.error.as_deref(), Some("cancelled by alice: stuck"));
    let next = run.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next), "no retry");
    assert!(claim(&alive, &r2).await.claims.is_empty());

    // The next occurrence is not affected (claimed past the grace: the dead replica may own it).
    sleep_until(&h, next + ms(600)).await;
    let claimed = claim(&alive, &r2).await;
    let second = claim_of(&claimed, "a");
    assert_eq!((second.scheduled_at, second.attempt), (next, 1));
    assert_ne!(second.run_id, run.run_id);
}

pub async fn a_cancel_of_an_occurrence_waiting_for_its_retry_ends_it_cancelled(
    h: impl StoreUnderTest,
) {
    // "A retrying occurrence retries no more": between attempts, a cancel ends the occurrence
    // `cancelled` by the requester, with its audit row, and the job goes on at its next occurrence.
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (store, runner, run, retry_at) =
        failed_awaiting_its_retry(&h, &spec, "a", Duration::from_secs(1)).await;
    let operator = h.operator();
    let before = operator.audited("cancel").await;

    let asked = operator.cancel("a", "alice", Some("enough")).await;
    assert_eq!(asked, Ok(run.run_id));
    assert_eq!(
        operator.audited("cancel").await,
        before.map(|n| n + 1),
        "one row of the audit trail"
    );
    let recorded = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Cancelled), "{recorded:?}");
    assert_eq!(
        recorded.error.as_deref(),
        Some("cancelled by alice: enough")
    );
    let next = run.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));

    // The retry's instant passes: nothing is claimed, and there is nothing more to cancel.
    sleep_until(&h, retry_at + ms(50)).await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    assert!(operator.cancel("a", "alice", None).await.is_err());

    // The next occurrence runs as usual.
    sleep_until(&h, next + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let second = claim_of(&claimed, "a");
    assert_eq!((second.scheduled_at, second.attempt), (next, 1));
    assert_ne!(second.run_id, run.run_id);
}

pub async fn a_jittered_run_claimed_before_its_start_is_not_in_flight_for_a_cancel(
    h: impl StoreUnderTest,
) {
    // A regular run claimed ahead is in flight from its start, which for a jittered job is its instant
    // plus the job's offset (docs/runtime.md, "Jitter"), not its instant: every store decides so
    // (`rules::operator::in_flight`).
    let (jittered_job, offset) =
        jittered("spread", TEN_SECONDLY, Duration::from_secs(3), 2000..2500);
    let verb = jittered_job.verb.clone();
    let spec = deployment("billing@1", vec![jittered_job]);
    settle_where(&h, |s| s % 10 == 2).await;
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, &verb).await.unwrap();
    let start = at + TimeDelta::from_std(offset).unwrap();
    sleep_until(&h, start - ms(500)).await;
    let claimed = claim_ahead(&store, &runner).await;
    let run = claim_of(&claimed, &verb).clone();
    assert_eq!(run.start_at(), start);

    // Past its instant, before its start: not in flight yet.
    let operator = h.operator();
    let refused = operator.cancel(&verb, "alice", None).await.unwrap_err();
    assert_eq!(
        refused,
        format!("`{verb}` has no run in flight: there is nothing to cancel")
    );
    // From its start, it is.
    sleep_until(&h, start + ms(50)).await;
    assert_eq!(operator.cancel(&verb, "alice", None).await, Ok(run.run_id));
}

pub async fn a_cancel_made_while_no_one_waits_for_a_change_is_heard_by_the_next_wait(
    h: impl StoreUnderTest,
) {
    // The replica running the run is busy when the request's wake-up comes (claiming, starting runs,
    // at its cap): its next wait hears it at once, not at the renewals' backstop.
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, _, run) = claimed_a(&h, &spec).await;
    drain(&store).await;
    assert_eq!(
        h.operator().cancel("a", "alice", None).await,
        Ok(run.run_id)
    );
    let heard = tokio::time::timeout(Duration::from_secs(5), store.changed()).await;
    assert_eq!(heard, Ok(Change::Claim), "the wake-up was lost");
}

/// A replica of `spec`, and its claim of the first occurrence of `a`.
async fn claimed_a<H: StoreUnderTest>(h: &H, spec: &DeploymentSpec) -> (H::Store, Runner, Claim) {
    let (store, runner) = replica(h, spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(h, at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let run = claim_of(&claimed, "a").clone();
    (store, runner, run)
}

/// Records `finish`, the end of a run of [`retrying_a`] that says `cancelled`, and checks it: answered
/// [`Finished::Cancelled`] where an operator's request overruled it (`requested`), else
/// [`Finished::Recorded`]; recorded `cancelled` with the finish's error, and not retried, the job
/// going on at the occurrence after the run's.
async fn recorded_cancelled<H: StoreUnderTest>(
    h: &H,
    (store, runner): (&H::Store, &Runner),
    finish: &Finish,
    requested: bool,
) {
    let run = run_of(h, finish.run_id).await.unwrap();
    let next = run.scheduled_at + TimeDelta::seconds(10);
    let (next_execution, skipped) = (Some(next), 0);
    let answered = if requested {
        Finished::Cancelled {
            next_execution,
            skipped,
        }
    } else {
        Finished::Recorded {
            next_execution,
            skipped,
        }
    };
    assert_eq!(finish_one(store, runner, finish).await, answered);
    let recorded = run_of(h, finish.run_id).await.unwrap();
    assert_eq!(
        (recorded.outcome, recorded.error.as_deref()),
        (Some(Outcome::Cancelled), finish.error.as_deref()),
        "{recorded:?}"
    );
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
}

/// The first attempt of `a` (retrying, in `spec`) failed, the replica claimed its retry ahead of its
/// instant, and alice cancelled it ("enough"): the replica, the first attempt's claim, the retry's,
/// and its instant.
async fn retry_claimed_ahead_and_cancelled<H: StoreUnderTest>(
    h: &H,
    spec: &DeploymentSpec,
) -> (H::Store, Runner, Claim, Claim, DateTime<Utc>) {
    let (store, runner, run, retry_at) =
        failed_awaiting_its_retry(h, spec, "a", Duration::from_secs(1)).await;
    sleep_until(h, retry_at - ms(500)).await;
    let claimed = claim_ahead(&store, &runner).await;
    let retry = claim_of(&claimed, "a").clone();
    assert_eq!((retry.run_id, retry.attempt), (run.run_id, 2));
    assert_eq!(retry.start_at(), retry_at);
    let asked = h.operator().cancel("a", "alice", Some("enough")).await;
    assert_eq!(
        asked,
        Ok(run.run_id),
        "a retry claimed ahead can be cancelled"
    );
    (store, runner, run, retry, retry_at)
}

pub async fn a_retry_claimed_ahead_of_its_instant_is_cancelled_before_it_starts(
    h: impl StoreUnderTest,
) {
    // The replica claimed the retry ahead of its instant and waits for it: a cancel asks it, and the
    // replica records the run `cancelled` by the requester without starting its handler; no more
    // retries, and the job goes on at its next occurrence.
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (store, runner, run, retry, retry_at) = retry_claimed_ahead_and_cancelled(&h, &spec).await;
    let requests = store.cancels(&[run.run_id]).await.unwrap();
    assert_eq!(requests.len(), 1, "{requests:?}");
    // The replica heard it before the instant: it records the end without running the handler.
    let finish = ended(&retry, Outcome::Cancelled, Some(&requests[0].error()));
    recorded_cancelled(&h, (&store, &runner), &finish, true).await;
    assert_eq!(requests[0].error(), "cancelled by alice: enough");
    sleep_until(&h, retry_at + ms(50)).await;
    assert!(claim(&store, &runner).await.claims.is_empty(), "no retry");
}

pub async fn a_cancelled_retry_whose_next_occurrence_came_goes_on_after_now(
    h: impl StoreUnderTest,
) {
    // No replica claimed since the retried occurrence's successor came (the retry would have been cut
    // short there): the cancel ends the occurrence, and the job goes on at its first occurrence after
    // now, as after any run that ends now, never at one already past.
    let every_three_seconds = retried(job("a", "*/3 * * * * *"));
    let spec = deployment("billing@1", vec![every_three_seconds]);
    let (_, _, run, _) =
        failed_awaiting_its_retry(&h, &spec, "a", Duration::from_millis(500)).await;
    let passed = run.scheduled_at + TimeDelta::seconds(3);
    sleep_until(&h, passed + ms(500)).await;

    let asked = h.operator().cancel("a", "alice", None).await;
    assert_eq!(asked, Ok(run.run_id));
    let recorded = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(recorded.outcome, Some(Outcome::Cancelled), "{recorded:?}");
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(passed + TimeDelta::seconds(3)),
        "the occurrence past is not due again"
    );
}

pub async fn a_finish_that_says_cancelled_without_a_request_is_recorded_as_it_says(
    h: impl StoreUnderTest,
) {
    // No operator asked: the store records the finish's own `cancelled` and its error, not retried,
    // and answers `Recorded`, as for any finish it did not overrule; `Finished::Cancelled` says an
    // operator's request overruled the finish, and the executor counts what the store answers.
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (store, runner, run) = claimed_a(&h, &spec).await;
    let finish = ended(&run, Outcome::Cancelled, Some("the handler gave up"));
    recorded_cancelled(&h, (&store, &runner), &finish, false).await;
}

pub async fn a_cancelled_retry_claimed_ahead_and_given_back_at_shutdown_ends_cancelled(
    h: impl StoreUnderTest,
) {
    // The replica claimed the retry ahead of its instant, an operator cancelled it, and the replica
    // shut down before the instant without starting it: the run is not given back to be tried again,
    // it ends `cancelled` by the requester, and the job goes on at its next occurrence
    // (docs/operations.md, "Cancelling a run").
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (store, runner, run, _, retry_at) = retry_claimed_ahead_and_cancelled(&h, &spec).await;

    store.deregister(&runner, &[]).await.unwrap();
    let recorded = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(
        (recorded.outcome, recorded.error.as_deref()),
        (Some(Outcome::Cancelled), Some("cancelled by alice: enough")),
        "{recorded:?}"
    );
    let next = run.scheduled_at + TimeDelta::seconds(10);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next), "no retry");
    let (other, r2) = replica(&h, &spec).await;
    sleep_until(&h, retry_at + ms(50)).await;
    assert!(claim(&other, &r2).await.claims.is_empty(), "no retry");
}

pub async fn a_cancelled_regular_run_given_back_before_it_started_ends_cancelled(
    h: impl StoreUnderTest,
) {
    // A regular run claimed ahead is in flight from its start: the cancel at its start asks it, and
    // its replica, which had not started it (at its cap, or shutting down), gives it back. The
    // occurrence the operator stopped does not run after all: its run ends `cancelled` by the
    // requester, and the job goes on at its next occurrence (docs/operations.md, "Cancelling a run").
    let spec = deployment("billing@1", vec![retrying_a()]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at - ms(500)).await;
    let claimed = claim_ahead(&store, &runner).await;
    let run = claim_of(&claimed, "a").clone();
    assert_eq!(run.scheduled_at, at);
    sleep_until(&h, at + ms(50)).await;
    assert_eq!(
        h.operator().cancel("a", "alice", None).await,
        Ok(run.run_id)
    );

    store.give_back(&runner, &[run.run_id]).await.unwrap();
    let recorded = run_of(&h, run.run_id).await;
    let recorded = recorded.expect("the run is recorded, not dropped");
    assert_eq!(
        (recorded.outcome, recorded.error.as_deref()),
        (Some(Outcome::Cancelled), Some("cancelled by alice")),
        "{recorded:?}"
    );
    let next = at + TimeDelta::seconds(10);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
    assert!(claim(&store, &runner).await.claims.is_empty(), "not again");
}
