//! What an operator does to a running store: a manual run (`cronverb trigger`), a pause and a resume,
//! and how each meets the schedule, overlap and a pending retry (docs/operations.md, "Pause and resume"
//! and "Manual runs"; docs/runtime.md, "Retries").

use std::time::Duration;

use cron_runtime::store::{Finishing, RETRIES_CUT_SHORT, Store};

use super::*;

/// Due every other second: a retry half a second after a failure comes well before the next occurrence.
const TWO_SECONDLY: &str = "*/2 * * * * *";

/// The first attempt of a job `verb` ([`TEN_SECONDLY`], [`TWO_SECONDLY`]), failed and waiting for its retry `after` its
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
    // What the handler's context says started it (`Trigger::Manual`).
    assert!(manual.manual && !manual.backfill, "{manual:?}");
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

pub async fn a_manual_run_given_back_before_it_started_is_pending_again(h: impl StoreUnderTest) {
    // A replica that shuts down before a manual run it claimed has started gives it back: the trigger
    // is pending again on its row, and the next claim runs it (docs/operations.md, "Manual runs").
    let spec = deployment("billing@1", vec![job("a", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "a").await;
    let manual = manual_run(&h, &store, &runner, "a").await;
    store.give_back(&runner, &[manual.run_id]).await.unwrap();
    assert_eq!(run_of(&h, manual.run_id).await, None, "dropped");
    let claimed = claim(&store, &runner).await;
    let again = claim_of(&claimed, "a");
    assert_eq!(again.scheduled_at, manual.scheduled_at, "{claimed:?}");
    assert!(run_of(&h, again.run_id).await.unwrap().manual);
    let again = again.clone();
    finish_one(&store, &runner, &succeeded(&again)).await;
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
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

pub async fn a_regular_occurrence_due_with_a_trigger_runs_once_and_takes_the_trigger(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(50)).await;
    h.trigger("a").await.unwrap();
    // One run: the regular occurrence, which satisfies the trigger.
    let claimed = claim(&store, &runner).await;
    let [regular] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(regular.scheduled_at, at, "{claimed:?}");
    finish_one(&store, &runner, &succeeded(regular)).await;
    let again = claim(&store, &runner).await;
    assert!(again.claims.is_empty(), "the trigger ran: {again:?}");
    assert_eq!(h.runs().await.len(), 1);
}

pub async fn a_manual_run_overlapping_the_regular_occurrence_skips_it(h: impl StoreUnderTest) {
    settle(&h).await;
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let regular = h.next_execution(MODULE, "a").await.unwrap();
    let manual = manual_run(&h, &store, &runner, "a").await;
    // The regular occurrence comes while the manual run executes: the job goes on after the run, and
    // the occurrence it overlapped is skipped (docs/operations.md, "Manual runs").
    let ended_at = regular + ms(500);
    sleep_until(&h, ended_at + ms(10)).await;
    let finish = Finish {
        ended_at: Some(ended_at),
        ..succeeded(&manual)
    };
    assert_eq!(
        finish_one(&store, &runner, &finish).await,
        Finished::Recorded {
            next_execution: Some(regular + TimeDelta::seconds(1)),
            skipped: 1
        }
    );
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(regular + TimeDelta::seconds(1))
    );
}

pub async fn a_paused_verb_stays_paused_across_a_takeover(h: impl StoreUnderTest) {
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", SECONDLY)])).await;
    h.pause("a").await;
    let (new, runner) = replica(&h, &deployment("billing@2", vec![job("a", SECONDLY)])).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(50)).await;
    assert!(
        claim(&new, &runner).await.claims.is_empty(),
        "the takeover carried the pause"
    );
    h.resume("a").await;
    let next = h.next_execution(MODULE, "a").await.unwrap();
    assert!(next > at, "{next} after {at}");
    sleep_until(&h, next + ms(50)).await;
    let claimed = claim(&new, &runner).await;
    assert_eq!(claim_of(&claimed, "a").scheduled_at, next);
}

pub async fn a_pending_trigger_moves_to_the_deployment_that_takes_over(h: impl StoreUnderTest) {
    let (old, old_runner) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    let requested_at = h.trigger("a").await.unwrap();
    let (new, runner) = replica(&h, &deployment("billing@2", vec![job("a", YEARLY)])).await;
    assert!(claim(&old, &old_runner).await.claims.is_empty());
    let claimed = claim(&new, &runner).await;
    let manual = claim_of(&claimed, "a");
    assert_eq!(manual.scheduled_at, requested_at, "{claimed:?}");
    assert!(run_of(&h, manual.run_id).await.unwrap().manual);
    assert!(claim(&new, &runner).await.claims.is_empty(), "it runs once");
}

pub async fn a_trigger_waits_for_a_run_claimed_ahead_that_has_not_started(h: impl StoreUnderTest) {
    // A job due every second is claimed ahead nearly all the time (the end of each run claims the
    // next occurrence): a trigger then waits for that run instead of being refused.
    settle(&h).await;
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let claimed = claim_ahead(&store, &runner).await;
    let ahead = claim_of(&claimed, "a").clone();
    let requested_at = h.trigger("a").await.unwrap();

    // The pending trigger keeps the run's end from claiming the next occurrence; the end wakes the
    // replicas, whose claim takes the trigger.
    let ((results, chained), change) = woken_by(&store, async {
        let Finishing { results, claimed } = store
            .finish(&runner, &[succeeded(&ahead)], Some(Duration::from_secs(1)))
            .await;
        (results, claimed)
    })
    .await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        chained.as_ref().is_none_or(|c| c.claims.is_empty()),
        "the trigger comes first"
    );
    assert!(change.is_some(), "the run's end wakes the replicas");
    let claimed = claim(&store, &runner).await;
    let manual = claim_of(&claimed, "a");
    assert_eq!(manual.scheduled_at, requested_at, "{claimed:?}");
    assert!(run_of(&h, manual.run_id).await.unwrap().manual);
    // A run that has started is executing: another trigger is refused.
    assert!(h.trigger("a").await.is_err());
}

pub async fn a_finish_claims_nothing_for_a_verb_paused_while_its_run_executed(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    let run = claim_of(&claimed, "a").clone();
    h.pause("a").await;
    // Its next occurrence is within the finish's horizon, and paused: nothing is claimed.
    let finish = Finish {
        ended_at: Some(claimed.now),
        ..succeeded(&run)
    };
    let Finishing {
        results,
        claimed: chained,
    } = store
        .finish(&runner, &[finish], Some(Duration::from_secs(1)))
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        chained.as_ref().is_none_or(|c| c.claims.is_empty()),
        "paused"
    );
    let next = next_second(claimed.now);
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
    sleep_until(&h, next + ms(100)).await;
    assert!(claim(&store, &runner).await.claims.is_empty(), "paused");
}

pub async fn a_batch_with_a_manual_run_keeps_the_regular_schedule(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("m", YEARLY), job("r", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "m").await;
    let at = h.next_execution(MODULE, "r").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    h.trigger("m").await.unwrap();
    let claimed = claim(&store, &runner).await;
    let (m, r) = (claim_of(&claimed, "m"), claim_of(&claimed, "r"));
    let ended_at = at + ms(100);
    let finishes = [m, r].map(|claim| Finish {
        ended_at: Some(ended_at),
        ..succeeded(claim)
    });
    assert_eq!(
        finish_all(&store, &runner, &finishes).await,
        [
            Finished::Recorded {
                next_execution: yearly,
                skipped: 0
            },
            Finished::Recorded {
                next_execution: Some(at + TimeDelta::seconds(1)),
                skipped: 0
            }
        ]
    );
    assert_eq!(
        h.next_execution(MODULE, "m").await,
        yearly,
        "the manual run leaves the regular occurrence alone"
    );
    let run = run_of(&h, m.run_id).await.unwrap();
    assert!(run.manual, "{run:?}");
    assert_eq!((run.outcome, run.skipped), (Some(Outcome::Succeeded), 0));
}

pub async fn a_heartbeat_leaves_out_a_paused_job_and_counts_a_pending_trigger<H: StoreUnderTest>(
    h: H,
) {
    let spec = deployment("billing@1", vec![job("a", YEARLY), job("b", "0 0 * * *")]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "a").await;
    h.pause("b").await;
    let beat = store.heartbeat(&runner).await.unwrap();
    let requested_at = h.trigger("b").await.unwrap();
    let triggered = store.heartbeat(&runner).await.unwrap();
    if H::HEARTBEAT_HINTS {
        // A paused job is not due; a pending trigger is, paused or not.
        assert_eq!(beat.next_due, yearly, "{beat:?}");
        assert_eq!(triggered.next_due, Some(requested_at), "{triggered:?}");
    } else {
        assert_eq!((beat.next_due, triggered.next_due), (None, None));
    }
}

pub async fn a_retry_paused_past_its_instant_runs_at_the_resume(h: impl StoreUnderTest) {
    // Nothing starts while a job is paused, its pending retry included; resumed before the occurrence
    // after the retried one, the retry runs at the resume, which reports it then, not at the instant
    // that passed while paused (docs/operations.md, "Pause and resume").
    let spec = deployment("billing@1", vec![job("a", TWO_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (first, retry_at) =
        failed_first_attempt(&h, &store, &runner, "a", Duration::from_millis(500)).await;
    h.pause("a").await;
    sleep_until(&h, retry_at + ms(300)).await;
    assert!(
        claim(&store, &runner).await.claims.is_empty(),
        "paused: the retry waits"
    );
    let before = h.now().await;
    let reported = h.resume("a").await.expect("a next run");
    assert!(
        reported >= before,
        "the resume at {before} or later reports a next run at {reported}, in the past"
    );
    assert_eq!(h.next_execution(MODULE, "a").await, Some(reported));
    let claimed = claim(&store, &runner).await;
    let retry = claim_of(&claimed, "a").clone();
    assert_eq!(
        (
            retry.run_id,
            retry.scheduled_at,
            retry.attempt,
            retry.retry_at
        ),
        (first.run_id, first.scheduled_at, 2, Some(reported)),
        "the retry runs at the resume as the occurrence's second attempt: {claimed:?}"
    );
    finish_one(&store, &runner, &succeeded(&retry)).await;
    let run = run_of(&h, first.run_id).await.unwrap();
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        (run.outcome, outcomes),
        (
            Some(Outcome::Succeeded),
            vec![Outcome::Failed, Outcome::Succeeded]
        )
    );
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(first.scheduled_at + TimeDelta::seconds(2))
    );
}

pub async fn a_retry_whose_next_occurrence_came_while_paused_is_cut_short_at_the_resume(
    h: impl StoreUnderTest,
) {
    // The occurrence after the retried one came while the job was paused: the resume ends the retried
    // occurrence `failed`, its retries cut short, and the job goes on at its first occurrence after the
    // resume; the occurrence that came while paused is not run (docs/operations.md, "Pause and
    // resume").
    let spec = deployment("billing@1", vec![job("a", TWO_SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (first, _) =
        failed_first_attempt(&h, &store, &runner, "a", Duration::from_millis(500)).await;
    h.pause("a").await;
    let came_while_paused = first.scheduled_at + TimeDelta::seconds(2);
    sleep_until(&h, came_while_paused + ms(300)).await;
    assert!(claim(&store, &runner).await.claims.is_empty(), "paused");
    let reported = h.resume("a").await;
    let after_resume = came_while_paused + TimeDelta::seconds(2);
    assert_eq!(
        reported,
        Some(after_resume),
        "the resume reports the first occurrence after it"
    );
    assert_eq!(h.next_execution(MODULE, "a").await, Some(after_resume));
    let run = run_of(&h, first.run_id).await.unwrap();
    let outcomes: Vec<Outcome> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        (run.outcome, run.error.as_deref(), outcomes),
        (
            Some(Outcome::Failed),
            Some(RETRIES_CUT_SHORT),
            vec![Outcome::Failed]
        ),
        "{run:?}"
    );
    let claimed = claim(&store, &runner).await;
    assert!(
        claimed.claims.is_empty(),
        "the occurrence that came while paused is not run: {claimed:?}"
    );
    sleep_until(&h, after_resume + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let next = claim_of(&claimed, "a");
    assert_eq!(
        (next.scheduled_at, next.attempt, next.late),
        (after_resume, 1, false)
    );
    let scheduled: Vec<DateTime<Utc>> = h.runs().await.iter().map(|r| r.scheduled_at).collect();
    assert_eq!(scheduled, [first.scheduled_at, after_resume]);
}
