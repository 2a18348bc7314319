//! Missed runs: a claim more than the tolerance after an occurrence is late; `missed = "once"` runs it,
//! `missed = "skip"` records it skipped (docs/runtime.md, "Missed runs").

use cron_runtime::store::{ClaimAction, DeploymentSpec};

use super::*;

pub async fn a_late_run_under_missed_once_runs_once_and_counts_what_it_skipped(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(2_500)).await;
    let claimed = claim(&store, &runner).await;
    let [c] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(
        (c.action, c.late, c.scheduled_at),
        (ClaimAction::Run, true, at),
        "the late occurrence runs once"
    );

    let before = h.now().await;
    let finished = finish_one(&store, &runner, &succeeded(c)).await;
    let after = h.now().await;
    let Finished::Recorded {
        next_execution: Some(next),
        skipped,
    } = finished
    else {
        panic!("{finished:?}")
    };
    // Scheduled after now; the occurrences since the late one never run.
    assert!(
        next >= next_second(before) && next <= next_second(after),
        "{next} {before} {after}"
    );
    assert_eq!(skipped, seconds_between(at, next) - 1);
    assert!(skipped >= 2, "{skipped}");
    let run = run_of(&h, c.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.skipped),
        (Some(Outcome::Succeeded), skipped)
    );
    assert!(run.finished_at.is_some());
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));
}

pub async fn a_late_job_under_missed_skip_is_recorded_skipped_and_rescheduled(
    h: impl StoreUnderTest,
) {
    let spec = deployment(
        "billing@1",
        vec![skipping(job("a", SECONDLY)), job("b", YEARLY)],
    );
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(2_500)).await;
    let before = h.now().await;
    let claimed = claim(&store, &runner).await;
    let [c] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(
        (c.action, c.late, c.scheduled_at),
        (ClaimAction::Skipped, true, at)
    );
    // Rescheduled after now; its own occurrence and the ones after it up to then never run.
    let next = h.next_execution(MODULE, "a").await.expect("idle again");
    assert!(
        next >= next_second(before) && next <= next_second(claimed.now),
        "{next} {before} {claimed:?}"
    );
    let run = run_of(&h, c.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.skipped, run.started_at),
        (Some(Outcome::Skipped), seconds_between(at, next), None)
    );
    // The claim reports what the row counts (the executor's `cron_runs_skipped_total`).
    assert_eq!(c.skipped, run.skipped);
    assert!(run.finished_at.is_some());
    // The run is already recorded: a finish of it is refused.
    assert_eq!(
        finish_one(&store, &runner, &succeeded(c)).await,
        Finished::Fenced
    );
}

pub async fn a_job_within_the_tolerance_is_not_late(h: impl StoreUnderTest) {
    // The same job in two modules, claimed 2.5 s after its occurrence: within the default tolerance,
    // and late under a tolerance of one second.
    let spec = deployment("billing@1", vec![skipping(job("a", SECONDLY))]);
    let strict = DeploymentSpec {
        module: "strict".to_owned(),
        ..deployment("strict@1", vec![skipping(job("a", SECONDLY))])
    };
    let (store, runner) = replica(&h, &spec).await;
    let (strict_store, strict_runner) = replica_with(&h, short_tolerance(), &strict).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    let strict_at = h.next_execution("strict", "a").await.unwrap();
    sleep_until(&h, at.max(strict_at) + ms(2_500)).await;

    let claimed = claim(&store, &runner).await;
    assert_eq!(
        (claimed.claims[0].late, claimed.claims[0].action),
        (false, ClaimAction::Run)
    );
    let claimed = claim(&strict_store, &strict_runner).await;
    assert_eq!(
        (claimed.claims[0].late, claimed.claims[0].action),
        (true, ClaimAction::Skipped)
    );
}
