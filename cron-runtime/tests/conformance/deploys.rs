//! Deploys: the active deployment of a module is the most recently registered one with a live replica;
//! a takeover carries unchanged verbs over, and a verb never runs under two deployments at once
//! (docs/deploying.md; G6, docs/operations.md).

use std::time::Duration;

use cron_runtime::store::Store;

use super::*;

pub async fn a_takeover_waits_for_the_old_deployments_run_and_carries_unchanged_verbs(
    h: impl StoreUnderTest,
) {
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("a", SECONDLY), job("b", SECONDLY)]);
    let v2 = deployment("billing@2", vec![job("a", SECONDLY), job("b", SECONDLY)]);
    let (old, r1) = replica(&h, &v1).await;
    let first = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, first + ms(100)).await;
    // `a` is in flight under the old deployment; `b` is due and not claimed.
    let in_flight = old.claim_due(&r1, Duration::ZERO, 1).await.unwrap();
    assert_eq!(verbs(&in_flight), ["a"]);

    // The new version's first replica takes the module over at once: `b` keeps its occurrence, and `a`
    // continues after the one in flight.
    let (new, r2) = replica(&h, &v2).await;
    assert_eq!(h.next_execution(MODULE, "b").await, Some(first));
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(first + TimeDelta::seconds(1)),
        "an unchanged verb continues after the occurrence in flight"
    );

    // While the old run is in flight, the new deployment does not start `a`, even when it is due
    // within the claim's window, and does not spin on it either.
    let blocked = claim_ahead(&new, &r2).await;
    assert_eq!(verbs(&blocked), ["b"], "{blocked:?}");
    assert_eq!(blocked.next_due, None, "{blocked:?}");
    // The old deployment starts nothing any more.
    assert!(claim_ahead(&old, &r1).await.claims.is_empty());

    // The old run finishes normally; that wakes the new deployment, which continues after it.
    let (finished, change) = woken_by(
        &new,
        finish_one(&old, &r1, &succeeded(&in_flight.claims[0])),
    )
    .await;
    assert!(
        change.is_some(),
        "the finish of an old deployment's run must wake the active one"
    );
    let Finished::Recorded {
        next_execution: Some(next),
        ..
    } = finished
    else {
        panic!("{finished:?}")
    };
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));

    // From now on `a` runs under the new deployment.
    sleep_until(&h, next + ms(100)).await;
    let claimed = claim(&new, &r2).await;
    assert_eq!(verbs(&claimed), ["a"]);
}

pub async fn a_takeover_starts_changed_and_added_verbs_and_stops_removed_ones(
    h: impl StoreUnderTest,
) {
    let v1 = deployment(
        "billing@1",
        vec![
            job("same", SECONDLY),
            job("changed", SECONDLY),
            job("removed", SECONDLY),
        ],
    );
    let v2 = deployment(
        "billing@2",
        vec![
            job("same", SECONDLY),
            job("changed", "*/2 * * * * *"),
            job("added", SECONDLY),
        ],
    );
    let (old, r1) = replica(&h, &v1).await;
    // Every job of the old deployment is due and not claimed: a recomputed occurrence would be later.
    let due = h.next_execution(MODULE, "same").await.unwrap();
    sleep_until(&h, due + ms(500)).await;

    let before = h.now().await;
    replica(&h, &v2).await;
    let after = h.now().await;
    assert_eq!(h.next_execution(MODULE, "same").await, Some(due));
    // Changed or added: from their own schedule, after the takeover.
    for (verb, expression) in [("changed", "*/2 * * * * *"), ("added", SECONDLY)] {
        let next = h.next_execution(MODULE, verb).await.unwrap();
        let schedule = zoned(expression);
        assert!(
            next >= schedule.next_after(before).unwrap()
                && next <= schedule.next_after(after).unwrap(),
            "`{verb}`: {next} {before} {after}"
        );
    }
    // The removed verb stops: its deployment is inactive, and the new one has no such job.
    assert!(claim(&old, &r1).await.claims.is_empty());
    assert_eq!(h.next_execution(MODULE, "removed").await, None);
}

pub async fn a_restarting_old_replica_changes_nothing(h: impl StoreUnderTest) {
    let v1 = deployment("billing@1", vec![job("a", SECONDLY)]);
    let v2 = deployment("billing@2", vec![job("a", SECONDLY)]);
    let (old, r1) = replica(&h, &v1).await;
    let (new, r2) = replica(&h, &v2).await;
    let before = h.next_execution(MODULE, "a").await.unwrap();

    let (restarted, r3) = replica(&h, &v1).await;
    old.heartbeat(&r1).await.unwrap();
    restarted.heartbeat(&r3).await.unwrap();
    assert_eq!(h.next_execution(MODULE, "a").await, Some(before));
    sleep_until(&h, before + ms(100)).await;
    assert!(claim(&restarted, &r3).await.claims.is_empty());
    assert!(claim(&old, &r1).await.claims.is_empty());
    assert_eq!(verbs(&claim(&new, &r2).await), ["a"]);
}

pub async fn after_a_rollback_the_older_deployment_takes_over_by_itself(h: impl StoreUnderTest) {
    let v1 = deployment("billing@1", vec![job("a", SECONDLY)]);
    let v2 = deployment("billing@2", vec![job("a", SECONDLY)]);
    let (old, r1) = replica_with(&h, short_lease(), &v1).await;
    let (new, r2) = replica_with(&h, short_lease(), &v2).await;
    let (frozen, r3) = replica_with(&h, short_lease(), &v2).await;
    let frozen_seen = h.now().await;
    // The newer deployment runs `a` once: its schedule is now ahead of the older deployment's row.
    let first = h.next_execution(MODULE, "a").await.unwrap();
    // Past the grace: the two newer replicas spread the work, and the other may own `a`.
    sleep_until(&h, first + past_the_grace()).await;
    let claimed = claim(&frozen, &r3).await;
    let Finished::Recorded {
        next_execution: Some(carried),
        ..
    } = finish_one(&frozen, &r3, &succeeded(&claimed.claims[0])).await
    else {
        panic!("not recorded")
    };
    assert!(carried > first);

    // One newer replica shuts down; another is still alive: nothing changes.
    new.deregister(&r2, &[]).await.unwrap();
    assert!(!old.heartbeat(&r1).await.unwrap().changed);
    assert!(claim_ahead(&old, &r1).await.claims.is_empty());
    assert_eq!(h.next_execution(MODULE, "a").await, Some(carried));

    // The last one stops heartbeating (killed): once it is no longer alive, the older one takes over,
    // continuing the schedule where the newer one was, and says so.
    sleep_until(&h, frozen_seen + ms(2_500)).await;
    let (beat, change) = woken_by(&old, old.heartbeat(&r1)).await;
    assert!(beat.unwrap().changed);
    assert!(change.is_some(), "a takeover wakes the replicas");
    assert_eq!(h.next_execution(MODULE, "a").await, Some(carried));
    let claimed = claim(&old, &r1).await;
    assert_eq!(claim_of(&claimed, "a").scheduled_at, carried);
}

pub async fn concurrent_first_replicas_take_over_once(h: impl StoreUnderTest) {
    let v1 = deployment("billing@1", vec![job("a", SECONDLY)]);
    let v2 = deployment("billing@2", vec![job("a", SECONDLY)]);
    let (old, r1) = replica(&h, &v1).await;
    let (s1, s2) = (h.replica(defaults()), h.replica(defaults()));
    let (a, b) = tokio::join!(s1.register(&v2), s2.register(&v2));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.deployment_id, b.deployment_id);
    // The newer deployment is the active one: it runs `a`, once, on the replica that owns the
    // occurrence (docs/runtime.md, "How work is spread").
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    assert!(claim(&old, &r1).await.claims.is_empty());
    let (first, second) = (claim(&s1, &a).await, claim(&s2, &b).await);
    assert_eq!([verbs(&first), verbs(&second)].concat(), ["a"]);
    assert!(claim(&s1, &a).await.claims.is_empty());
}

pub async fn a_run_ending_under_an_inactive_deployment_wakes_the_active_one(
    h: impl StoreUnderTest,
) {
    late_run_under_an_inactive_deployment(&h, &["a", "b"], SECONDLY, 1).await;
}

/// The same with a module of one job due every 3 s: the run overlaps one occurrence three seconds on.
pub async fn a_single_low_frequency_job_ending_under_an_inactive_deployment_goes_on_past_what_it_skipped(
    h: impl StoreUnderTest,
) {
    late_run_under_an_inactive_deployment(&h, &["a"], "*/3 * * * * *", 3).await;
}

/// Runs of `verbs` (due every `period` seconds) claimed under `billing@1`, then `billing@2` takes the
/// module over, then the runs end after the next occurrence, which they overlapped: the finish wakes
/// the active deployment, and each verb goes on there where the run left it, never at the occurrence
/// that ran nor at the one it skipped.
async fn late_run_under_an_inactive_deployment(
    h: &impl StoreUnderTest,
    verbs: &[&str],
    expression: &str,
    period: i64,
) {
    let jobs = |verbs: &[&str]| verbs.iter().map(|v| job(v, expression)).collect();
    let v1 = deployment("billing@1", jobs(verbs));
    let v2 = deployment("billing@2", jobs(verbs));
    let (old, r1) = replica(h, &v1).await;
    let at = h.next_execution(MODULE, verbs[0]).await.unwrap();
    sleep_until(h, at + ms(100)).await;
    let in_flight = claim(&old, &r1).await;
    assert_eq!(in_flight.claims.len(), verbs.len());
    let (new, r2) = replica(h, &v2).await;

    // The runs end together, after the occurrence the takeover carried: they overlapped it.
    sleep_until(h, at + ms(period * 1_000 + 500)).await;
    let finishes: Vec<Finish> = verbs
        .iter()
        .map(|verb| succeeded(claim_of(&in_flight, verb)))
        .collect();
    let (results, change) = woken_by(&new, finish_all(&old, &r1, &finishes)).await;
    assert!(
        change.is_some(),
        "the finish of an old deployment's runs must wake the active one"
    );
    for (verb, result) in verbs.iter().zip(results) {
        let Finished::Recorded {
            next_execution: Some(after_run),
            skipped: 1,
        } = result
        else {
            panic!("`{verb}`: {result:?}")
        };
        let next = h.next_execution(MODULE, verb).await.expect("idle");
        assert!(next > at, "`{verb}`: {next}");
        assert_eq!(
            next, after_run,
            "`{verb}`: the skipped occurrence must not run"
        );
    }
    let claimed = claim(&new, &r2).await;
    assert!(
        claimed.claims.iter().all(|c| c.scheduled_at > at),
        "{claimed:?}"
    );
}

/// A takeover while a manual run is in flight carries the verb's regular occurrence as it was: a
/// manual run takes no occurrence (docs/operations.md, "Manual runs"), so the new row does not go on
/// after the trigger's instant. One plan for every store (`rules::take_over`); the in-memory store went
/// on after the manual run's instant.
pub async fn a_takeover_during_a_manual_run_carries_the_regular_occurrence(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    // Paused, the row keeps an occurrence that has come and gone: the trigger's instant is later.
    h.pause("a").await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(1_200)).await;
    let requested_at = h.trigger("a").await.unwrap();
    let claimed = claim(&store, &runner).await;
    assert_eq!(claim_of(&claimed, "a").scheduled_at, requested_at);

    replica(&h, &deployment("billing@2", vec![job("a", SECONDLY)])).await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(at),
        "the regular occurrence, not one after the manual run's {requested_at}"
    );
}
