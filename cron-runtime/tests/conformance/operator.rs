//! What an operator does to a running store: a manual run (`cronverb trigger`), a pause and a resume,
//! and how each meets the schedule, overlap and a pending retry (docs/operations.md, "Pause and resume"
//! and "Manual runs"; docs/runtime.md, "Retries").

use std::time::Duration;

use super::*;

/// The first attempt of a [`TEN_SECONDLY`] job `verb`, failed and waiting for its retry `after` its
/// end; returns its claim and the retry's instant.
async fn failed_first_attempt<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
    verb: &str,
    after: Duration,
) -> (Claim, DateTime<Utc>) {
    let at = h.next_execution(MODULE, verb).await.unwrap();
    sleep_until(h, at + ms(50)).await;
    let claimed = claim(store, runner).await;
    let first = claim_of(&claimed, verb).clone();
    let ended_at = first.scheduled_at + ms(100);
    sleep_until(h, ended_at + ms(10)).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        retry_after: Some(after),
        ..ended(&first, Outcome::Failed, Some("relay refused"))
    };
    let retry_at = ended_at + TimeDelta::from_std(after).unwrap();
    assert_eq!(
        finish_one(store, runner, &finish).await,
        Finished::Retrying { at: retry_at }
    );
    (first, retry_at)
}

/// The manual run of `verb` that a claim takes after a trigger.
async fn manual_run<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
    verb: &str,
) -> Claim {
    let requested_at = h.trigger(verb).await.unwrap();
    let claimed = claim(store, runner).await;
    let manual = claim_of(&claimed, verb).clone();
    assert_eq!(manual.scheduled_at, requested_at, "{claimed:?}");
    assert_eq!((manual.attempt, manual.late), (1, false));
    manual
}

/// The retry of `first` at `retry_at` is claimed as its next attempt and succeeds; the occurrence ends
/// with both attempts, and no run is left `running`.
async fn retry_runs<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
    first: &Claim,
    retry_at: DateTime<Utc>,
) {
    sleep_until(h, retry_at + ms(50)).await;
    let claimed = claim(store, runner).await;
    let retry = claim_of(&claimed, &first.verb);
    assert_eq!(
        (
            retry.run_id,
            retry.scheduled_at,
            retry.attempt,
            retry.retry_at
        ),
        (first.run_id, first.scheduled_at, 2, Some(retry_at)),
        "the pending retry is claimed as the occurrence's second attempt: {claimed:?}"
    );
    finish_one(store, runner, &succeeded(retry)).await;
    let run = run_of(h, first.run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Succeeded), "{run:?}");
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Succeeded]);
    let running: Vec<RunView> = h
        .runs()
        .await
        .into_iter()
        .filter(|r| r.outcome.is_none())
        .collect();
    assert!(running.is_empty(), "runs left running: {running:?}");
    assert_eq!(
        h.next_execution(MODULE, &first.verb).await,
        Some(first.scheduled_at + TimeDelta::seconds(10))
    );
}

pub async fn a_trigger_runs_once_now_as_a_manual_run_and_leaves_the_schedule_alone(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "a").await.unwrap();
    let manual = manual_run(&h, &store, &runner, "a").await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    // A run in flight refuses another trigger (no overlap).
    assert!(h.trigger("a").await.is_err());
    assert_eq!(
        finish_one(&store, &runner, &succeeded(&manual)).await,
        Finished::Recorded {
            next_execution: Some(yearly),
            skipped: 0
        }
    );
    let run = run_of(&h, manual.run_id).await.unwrap();
    assert!(run.manual, "{run:?}");
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(h.next_execution(MODULE, "a").await, Some(yearly));
    assert!(claim(&store, &runner).await.claims.is_empty());
}

pub async fn a_paused_job_is_not_claimed_runs_when_triggered_and_resumes_after_now(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    h.pause("a").await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(1_200)).await;
    assert!(claim(&store, &runner).await.claims.is_empty(), "paused");
    // A manual run of a paused verb runs, and leaves the paused row as it is.
    let manual = manual_run(&h, &store, &runner, "a").await;
    finish_one(&store, &runner, &succeeded(&manual)).await;
    assert_eq!(h.next_execution(MODULE, "a").await, Some(at));
    assert!(claim(&store, &runner).await.claims.is_empty(), "paused");
    // Resumed, it goes on at its first occurrence after now: what came while paused is not run.
    h.resume("a").await;
    let now = h.now().await;
    let next = h.next_execution(MODULE, "a").await.unwrap();
    assert!(
        next > now && next <= now + TimeDelta::seconds(1),
        "{next} after {now}"
    );
    sleep_until(&h, next + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claim_of(&claimed, "a").scheduled_at, next);
}

pub async fn a_manual_run_ending_before_a_pending_retry_leaves_the_retry_at_its_instant(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (first, retry_at) =
        failed_first_attempt(&h, &store, &runner, "a", Duration::from_secs(3)).await;
    let manual = manual_run(&h, &store, &runner, "a").await;
    assert_eq!(
        finish_one(&store, &runner, &succeeded(&manual)).await,
        Finished::Recorded {
            next_execution: Some(retry_at),
            skipped: 0
        }
    );
    assert_eq!(h.next_execution(MODULE, "a").await, Some(retry_at));
    retry_runs(&h, &store, &runner, &first, retry_at).await;
}

pub async fn a_manual_run_ending_after_a_pending_retrys_instant_leaves_the_retry_to_the_claim(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (first, retry_at) =
        failed_first_attempt(&h, &store, &runner, "a", Duration::from_secs(1)).await;
    let manual = manual_run(&h, &store, &runner, "a").await;
    // The manual run executes past the retry's instant: the retry waits for it (no overlap).
    sleep_until(&h, retry_at + ms(500)).await;
    assert_eq!(
        finish_one(&store, &runner, &succeeded(&manual)).await,
        Finished::Recorded {
            next_execution: Some(retry_at),
            skipped: 0
        }
    );
    retry_runs(&h, &store, &runner, &first, retry_at).await;
}
