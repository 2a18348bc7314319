//! Claims: a claim takes the due idle jobs of its active deployment, each once, on the store's clock
//! (G1, G2, G3, docs/operations.md).

use std::time::Duration;

use cron_runtime::store::{ClaimAction, Store};

use super::*;

pub async fn a_claim_takes_due_jobs_once_on_the_stores_clock(h: impl StoreUnderTest) {
    settle(&h).await;
    let spec = deployment("billing@1", vec![job("a", SECONDLY), job("b", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let scheduled = h.next_execution(MODULE, "a").await.unwrap();
    // Nothing is due before its instant.
    let early = claim(&store, &runner).await;
    assert!(early.claims.is_empty(), "{early:?}");

    sleep_until(&h, scheduled + ms(100)).await;
    let before = h.now().await;
    let claimed = claim(&store, &runner).await;
    let after = h.now().await;
    assert!(
        claimed.now >= before && claimed.now <= after,
        "{claimed:?} {before} {after}"
    );
    let [c] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(
        (c.verb.as_str(), c.action, c.late, c.scheduled_at),
        ("a", ClaimAction::Run, false, scheduled)
    );
    // The lease runs from the claim; `claimed.now` is read as the claim answers.
    let lease = TimeDelta::seconds(30);
    assert!(
        c.lease_expires_at >= before + lease && c.lease_expires_at <= claimed.now + lease,
        "{c:?} {before} {claimed:?}"
    );
    // The next due is `b`'s, the only idle job left.
    assert_eq!(claimed.next_due, h.next_execution(MODULE, "b").await);

    // Executing: in flight for this runner, and not claimed again.
    assert_eq!(h.next_execution(MODULE, "a").await, None);
    let run = run_of(&h, c.run_id).await.expect("the run is recorded");
    assert_eq!(
        (run.outcome, run.scheduled_at, run.runner.as_str()),
        (None, scheduled, runner.name.as_str())
    );
    assert!(run.started_at.is_some());
    assert!(claim(&store, &runner).await.claims.is_empty());
}

pub async fn a_claim_takes_at_most_its_limit_and_says_more_is_due(h: impl StoreUnderTest) {
    let spec = deployment(
        "billing@1",
        vec![
            job("a", SECONDLY),
            job("b", SECONDLY),
            job("c", SECONDLY),
            job("d", YEARLY),
        ],
    );
    let (store, runner) = replica(&h, &spec).await;
    let d_next = h.next_execution(MODULE, "d").await;
    let due = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, due + ms(100)).await;

    // `a`, `b` and `c` are due: a claim of two says more may be due now.
    let full = store.claim_due(&runner, Duration::ZERO, 2).await.unwrap();
    assert_eq!(verbs(&full), ["a", "b"], "in the order of their rows");
    let next_due = full.next_due.expect("a full claim reports a next due");
    assert!(next_due <= full.now, "claim again at once: {full:?}");

    // The next claim takes the rest; then only `d` is left, not due.
    let rest = store.claim_due(&runner, Duration::ZERO, 2).await.unwrap();
    assert_eq!(verbs(&rest), ["c"]);
    assert_eq!(rest.next_due, d_next);
    let none = store.claim_due(&runner, Duration::ZERO, 2).await.unwrap();
    assert!(none.claims.is_empty(), "{none:?}");
    assert_eq!(none.next_due, d_next);
}

pub async fn a_claim_ahead_takes_a_job_due_within_the_window(h: impl StoreUnderTest) {
    // Registered at an even second, a job due every two seconds is first due nearly two seconds
    // later: both claims come half a second before its instant, however long the registration took
    // (on a loaded database, most of a second).
    settle_where(&h, |second| second % 2 == 0).await;
    let spec = deployment("billing@1", vec![job("a", "*/2 * * * * *")]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at - ms(500)).await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    let claimed = claim_ahead(&store, &runner).await;
    let [c] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!((c.scheduled_at, c.late), (at, false));
    assert!(
        at > claimed.now,
        "claimed ahead of its instant: {claimed:?}"
    );
    // The lease lasts at least its length from the claim, and no more than that from the instant.
    let lease = TimeDelta::seconds(30);
    assert!(
        c.lease_expires_at >= claimed.now + lease && c.lease_expires_at <= at + lease,
        "{claimed:?}"
    );
    let run = run_of(&h, c.run_id).await.unwrap();
    assert_eq!(
        run.started_at,
        Some(at),
        "its handler starts at its instant"
    );
}

pub async fn racing_replicas_claim_each_job_exactly_once(h: impl StoreUnderTest) {
    let jobs: Vec<JobSpec> = (0..20).map(|i| job(&format!("j{i}"), SECONDLY)).collect();
    let spec = deployment("billing@1", jobs);
    let (one, r1) = replica(&h, &spec).await;
    let (two, r2) = replica(&h, &spec).await;
    for round in 0..3 {
        // Every job is due at the next whole second.
        let second = next_second(h.now().await);
        sleep_until(&h, second + ms(100)).await;
        let (a, b) = tokio::join!(
            one.claim_due(&r1, Duration::ZERO, 20),
            two.claim_due(&r2, Duration::ZERO, 20)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let mut jobs: Vec<i64> = a.claims.iter().chain(&b.claims).map(|c| c.job_id).collect();
        jobs.sort();
        jobs.dedup();
        assert_eq!(a.claims.len() + b.claims.len(), 20, "round {round}");
        assert_eq!(jobs.len(), 20, "a job was claimed twice in round {round}");
        for c in &a.claims {
            finish_one(&one, &r1, &succeeded(c)).await;
        }
        for c in &b.claims {
            finish_one(&two, &r2, &succeeded(c)).await;
        }
    }
    assert_eq!(h.runs().await.len(), 60);
}
