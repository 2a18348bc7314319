//! Shutdown: runs claimed ahead go back to the store, the others are recorded `cancelled` or
//! `abandoned`, and no row waits for a lease (docs/runtime.md, "Shutdown").

use cron_runtime::store::Store;

use super::*;

/// A replica of a deployment of `started` (every second) and `ahead` (every even second) that holds a
/// run of each: `started` due and claimed at an odd second, `ahead` claimed ahead for the even second
/// after it. Also a second replica of the deployment.
async fn holding_started_and_ahead<H: StoreUnderTest>(
    h: &H,
) -> ((H::Store, Runner), (H::Store, Runner), Claim, Claim) {
    // Registered at an even second, so that the next odd second comes before `ahead`'s first instant.
    settle_where(h, |second| second % 2 == 0).await;
    let spec = deployment(
        "billing@1",
        vec![job("started", SECONDLY), job("ahead", "*/2 * * * * *")],
    );
    let (store, runner) = replica(h, &spec).await;
    let started_at = h.next_execution(MODULE, "started").await.unwrap();
    sleep_until(h, started_at + ms(100)).await;
    let claimed = claim_ahead(&store, &runner).await;
    // The other replica joins once the first holds both.
    let other = replica(h, &spec).await;
    let started = claim_of(&claimed, "started").clone();
    let ahead = claim_of(&claimed, "ahead").clone();
    assert!(started.scheduled_at <= claimed.now, "{claimed:?}");
    assert!(ahead.scheduled_at > claimed.now, "{claimed:?}");
    ((store, runner), other, started, ahead)
}

pub async fn give_back_returns_runs_that_never_started_to_the_store(h: impl StoreUnderTest) {
    settle(&h).await;
    let spec = deployment(
        "billing@1",
        vec![job("ahead", SECONDLY), job("other", YEARLY)],
    );
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "ahead").await.unwrap();
    let claimed = claim_ahead(&store, &runner).await;
    let ahead = claim_of(&claimed, "ahead");
    assert_eq!(ahead.scheduled_at, at);
    // The other replica joins once the first holds `ahead`: with two live, a claim ahead takes only
    // the occurrences its replica owns (docs/runtime.md, "How work is spread").
    let (other_store, other) = replica(&h, &spec).await;

    // Another runner cannot give it back; this one can, once.
    other_store
        .give_back(&other, &[ahead.run_id])
        .await
        .unwrap();
    assert_eq!(h.next_execution(MODULE, "ahead").await, None, "still held");
    store.give_back(&runner, &[ahead.run_id]).await.unwrap();
    assert!(h.runs().await.is_empty(), "the run is forgotten");
    assert_eq!(h.next_execution(MODULE, "ahead").await, Some(at));
    store.give_back(&runner, &[ahead.run_id]).await.unwrap();
    assert_eq!(h.next_execution(MODULE, "ahead").await, Some(at));
    // The occurrence is the other replica's to run (past the grace, whoever owns it).
    sleep_until(&h, at + past_the_grace()).await;
    let again = claim(&other_store, &other).await;
    assert_eq!(claim_of(&again, "ahead").scheduled_at, at);
}

pub async fn deregister_records_cancelled_runs_and_gives_back_the_ones_not_started(
    h: impl StoreUnderTest,
) {
    let ((store, runner), (other, r2), started, ahead) = holding_started_and_ahead(&h).await;
    store
        .deregister(&runner, &[started.run_id, ahead.run_id])
        .await
        .unwrap();

    let run = run_of(&h, started.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.error.as_deref()),
        (
            Some(Outcome::Cancelled),
            Some("cancelled by shutdown after the grace period")
        )
    );
    let next = h.next_execution(MODULE, "started").await;
    assert!(next > Some(started.scheduled_at), "idle again: {next:?}");
    // Claimed ahead and never started: the occurrence goes back for another replica.
    assert_eq!(run_of(&h, ahead.run_id).await, None);
    assert_eq!(
        h.next_execution(MODULE, "ahead").await,
        Some(ahead.scheduled_at)
    );
    // The other replica counts the one that left out at its next heartbeat (or a claim a second
    // after it last looked), and then owns every occurrence.
    other.heartbeat(&r2).await.unwrap();
    let claimed = claim_ahead(&other, &r2).await;
    assert_eq!(claim_of(&claimed, "ahead").scheduled_at, ahead.scheduled_at);
}

pub async fn deregister_ends_the_runs_it_was_not_told_about(h: impl StoreUnderTest) {
    // The executor lost track of both runs (a claim's answer cut short by the shutdown, a finish that
    // could not be recorded): deregistering names neither, and neither waits for its lease.
    let ((store, runner), _, started, ahead) = holding_started_and_ahead(&h).await;
    store.deregister(&runner, &[]).await.unwrap();

    // Its instant is still ahead: it never started, and goes back.
    assert_eq!(run_of(&h, ahead.run_id).await, None);
    assert_eq!(
        h.next_execution(MODULE, "ahead").await,
        Some(ahead.scheduled_at)
    );
    // Its handler may have run: recorded abandoned, and the job goes on.
    let run = run_of(&h, started.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.error.as_deref()),
        (
            Some(Outcome::Abandoned),
            Some("the replica shut down without recording how it ended")
        )
    );
    let next = h.next_execution(MODULE, "started").await;
    assert!(next > Some(started.scheduled_at), "idle again: {next:?}");
}

pub async fn an_occurrence_given_back_after_a_takeover_goes_to_the_active_deployment(
    h: impl StoreUnderTest,
) {
    // The old deployment claimed `ahead` before the new one took over, which carried its row past
    // that occurrence; the old replica then shuts down before the occurrence's instant.
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("ahead", SECONDLY)]);
    let (old, r1) = replica(&h, &v1).await;
    let claimed = claim_ahead(&old, &r1).await;
    let at = claim_of(&claimed, "ahead").scheduled_at;
    let v2 = deployment("billing@2", vec![job("ahead", SECONDLY)]);
    let (new, r2) = replica(&h, &v2).await;
    assert!(h.next_execution(MODULE, "ahead").await > Some(at));

    old.give_back(&r1, &[claimed.claims[0].run_id])
        .await
        .unwrap();
    assert_eq!(h.next_execution(MODULE, "ahead").await, Some(at));
    let taken = claim_ahead(&new, &r2).await;
    assert_eq!(claim_of(&taken, "ahead").scheduled_at, at);
}

pub async fn giving_back_and_leaving_wake_the_other_replicas(h: impl StoreUnderTest) {
    settle(&h).await;
    let spec = deployment("billing@1", vec![job("ahead", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let claimed = claim_ahead(&store, &runner).await;
    // The other replica joins once the first holds `ahead`: with two live, a claim ahead takes only
    // the occurrences its replica owns (docs/runtime.md, "How work is spread").
    let (other, _) = replica(&h, &spec).await;
    let (given, change) = woken_by(
        &other,
        store.give_back(&runner, &[claimed.claims[0].run_id]),
    )
    .await;
    given.unwrap();
    assert!(change.is_some(), "a give-back wakes the other replicas");
    let (left, change) = woken_by(&other, store.deregister(&runner, &[])).await;
    left.unwrap();
    assert!(change.is_some(), "a replica that leaves wakes the others");
}

pub async fn a_manual_run_given_back_after_a_takeover_is_pending_under_the_active_deployment(
    h: impl StoreUnderTest,
) {
    // The old deployment claimed a manual run; the new one took over (the trigger was the claim's, so
    // nothing was carried) before the old replica gave the run back, never started: the trigger is
    // pending again on the row that takes the verb's triggers now, the active deployment's.
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("report", YEARLY)]);
    let (old, r1) = replica(&h, &v1).await;
    let requested = h.trigger("report").await.unwrap();
    let claimed = claim(&old, &r1).await;
    let manual = claim_of(&claimed, "report").clone();
    assert_eq!(manual.scheduled_at, requested);
    let v2 = deployment("billing@2", vec![job("report", YEARLY)]);
    let (new, r2) = replica(&h, &v2).await;

    old.give_back(&r1, &[manual.run_id]).await.unwrap();
    assert!(h.runs().await.is_empty(), "the manual run is forgotten");
    let taken = claim(&new, &r2).await;
    let again = claim_of(&taken, "report");
    assert_eq!(again.scheduled_at, requested, "{taken:?}");
    let runs = h.runs().await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].manual && runs[0].outcome.is_none(), "{runs:?}");
}
