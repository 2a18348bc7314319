//! Leases: a claimed run is held through a lease its replica renews; any live replica's heartbeat takes
//! back a run whose lease expired, as `abandoned`, and the frozen replica is fenced (docs/runtime.md,
//! "Leases: a frozen replica cannot run on").

use cron_runtime::store::{Recovered, Store};

use super::*;

pub async fn renew_extends_only_the_runs_a_runner_holds(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica_with(&h, short_lease(), &spec).await;
    let (other_store, other) = replica_with(&h, short_lease(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Two replicas are live: a replica takes an occurrence it does not own only half a second past
    // its start (docs/runtime.md, "How work is spread"), so the claim waits past the grace, where
    // it takes the occurrence whoever owns it.
    sleep_until(&h, at + past_the_grace()).await;
    let claimed = claim(&store, &runner).await;
    let run_id = claimed.claims[0].run_id;

    sleep_until(&h, claimed.now + ms(1_000)).await;
    assert_eq!(
        other_store.renew(&other, &[run_id]).await.unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        store
            .renew(&runner, &[run_id, run_id + 1000])
            .await
            .unwrap(),
        [run_id]
    );
    // Past the lease the claim took, within the renewed one: the run is still held.
    sleep_until(&h, claimed.now + ms(2_500)).await;
    other_store.heartbeat(&other).await.unwrap();
    assert_eq!(run_of(&h, run_id).await.unwrap().outcome, None);
    // Not renewed again, it expires.
    sleep_until(&h, claimed.now + ms(3_500)).await;
    other_store.heartbeat(&other).await.unwrap();
    assert_eq!(
        run_of(&h, run_id).await.unwrap().outcome,
        Some(Outcome::Abandoned)
    );
}

pub async fn an_expired_lease_is_recovered_and_the_late_finish_is_fenced(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (frozen, r1) = replica_with(&h, short_lease(), &spec).await;
    let (alive, r2) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Two replicas are live: a replica takes an occurrence it does not own only half a second past
    // its start (docs/runtime.md, "How work is spread"), so the claim waits past the grace, where
    // it takes the occurrence whoever owns it.
    sleep_until(&h, at + past_the_grace()).await;
    let before = h.now().await;
    let claimed = claim(&frozen, &r1).await;
    let run_id = claimed.claims[0].run_id;

    // A live lease is not touched by another replica's heartbeat.
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert!(!beat.changed && beat.recovered.is_empty(), "{beat:?}");
    assert_eq!(run_of(&h, run_id).await.unwrap().outcome, None);

    // The first replica freezes; its lease runs out; the other replica takes the run back, and says
    // whose run it took (the executor's `cron_leases_recovered_total`).
    sleep_until(&h, claimed.now + ms(2_500)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert!(beat.changed);
    let run = run_of(&h, run_id).await.unwrap();
    assert_eq!(
        beat.recovered,
        [Recovered {
            module: MODULE.to_owned(),
            verb: run.verb.clone(),
        }]
    );
    assert_eq!(run.outcome, Some(Outcome::Abandoned));
    assert!(run.error.as_deref().unwrap().contains("lease"), "{run:?}");
    // No start was reported: the run keeps the claim's planned one (docs/operations.md, "The tables").
    let claimed_at = run.claimed_at.unwrap();
    assert!(before <= claimed_at && claimed_at <= claimed.now, "{run:?}");
    assert_eq!(run.started_at, Some(claimed_at.max(at)), "{run:?}");
    let next = h.next_execution(MODULE, "a").await.expect("idle again");
    assert!(next > at);

    // The frozen replica comes back: it can neither renew nor finish, and changes nothing.
    assert!(frozen.renew(&r1, &[run_id]).await.unwrap().is_empty());
    assert_eq!(
        finish_one(&frozen, &r1, &succeeded(&claimed.claims[0])).await,
        Finished::Fenced
    );
    assert_eq!(
        run_of(&h, run_id).await.unwrap().outcome,
        Some(Outcome::Abandoned)
    );
    assert_eq!(h.next_execution(MODULE, "a").await, Some(next));

    // The next occurrence is claimed normally, by the live replica (past the grace: the frozen one
    // still counts as live within the other's lease, and may own it).
    sleep_until(&h, next + past_the_grace()).await;
    assert_eq!(verbs(&claim(&alive, &r2).await), ["a"]);
}

pub async fn a_heartbeat_says_when_a_job_is_next_due_and_when_a_held_lease_ends<
    H: StoreUnderTest,
>(
    h: H,
) {
    let spec = deployment(
        "billing@1",
        vec![job("a", SECONDLY), job("b", YEARLY), job("c", "0 0 * * *")],
    );
    let (runs_a, r1) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&runs_a, &r1).await;
    assert_eq!(verbs(&claimed), ["a"]);
    // The other replica joins once the first holds `a` (with two, either may own it).
    let (other, r2) = replica(&h, &spec).await;

    let beat = other.heartbeat(&r2).await.unwrap();
    if H::HEARTBEAT_HINTS {
        // The earliest occurrence among the idle jobs, and the lease of the run in flight.
        let b = h.next_execution(MODULE, "b").await.unwrap();
        let c = h.next_execution(MODULE, "c").await.unwrap();
        assert_eq!(beat.next_due, Some(b.min(c)), "{beat:?}");
        assert_eq!(beat.lease_ends, Some(claimed.claims[0].lease_expires_at));
    } else {
        assert_eq!((beat.next_due, beat.lease_ends), (None, None), "{beat:?}");
    }
    assert!(!beat.changed);
}

pub async fn a_run_claimed_ahead_holds_its_lease_from_its_instant(h: impl StoreUnderTest) {
    // G4 (docs/operations.md): the lease of a run claimed ahead runs from its scheduled instant, so a
    // replica that claims a second early does not lose the run a second sooner than one that claims on
    // time.
    settle(&h).await;
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica_with(&h, short_lease(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    let claimed = claim_ahead(&store, &runner).await;
    let c = claim_of(&claimed, "a");
    // The other replica joins once the first holds `a`: with two live, a claim ahead takes only the
    // occurrences its replica owns (docs/runtime.md, "How work is spread").
    let (other, other_runner) = replica_with(&h, short_lease(), &spec).await;
    assert!(
        at > claimed.now,
        "claimed ahead of its instant: {claimed:?}"
    );
    assert_eq!(
        c.lease_expires_at,
        at + TimeDelta::seconds(2),
        "{claimed:?}"
    );
    // Past two seconds from the claim, within two seconds of the instant: still held.
    sleep_until(&h, at + ms(1_500)).await;
    other.heartbeat(&other_runner).await.unwrap();
    assert_eq!(run_of(&h, c.run_id).await.unwrap().outcome, None);
    let finished = finish_one(&store, &runner, &succeeded(c)).await;
    assert!(
        matches!(finished, Finished::Recorded { .. }),
        "the replica that claimed ahead still holds its run: {finished:?}"
    );
}

pub async fn a_jobs_own_lease_is_taken_back_after_it_not_after_the_runtimes(
    h: impl StoreUnderTest,
) {
    // `lease = "3s"` on replicas whose lease is 30 s (docs/runtime.md, "Leases"): the claim takes the
    // job's lease, a renewal extends it by the job's lease, and a replica that stops renewing loses
    // the run after it; a job that sets none keeps the runtime's.
    settle(&h).await;
    let own = |verb| JobSpec {
        lease: Some(std::time::Duration::from_secs(3)),
        ..job(verb, SECONDLY)
    };
    let spec = deployment("billing@1", vec![own("a"), job("b", SECONDLY), own("c")]);
    let (dies, r1) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    let claimed = claim_ahead(&dies, &r1).await;
    // The other replica joins once the first holds all three: with two live, a claim ahead takes only
    // the occurrences its replica owns (docs/runtime.md, "How work is spread").
    let (alive, r2) = replica(&h, &spec).await;
    assert!(
        at > claimed.now,
        "claimed ahead of its instant: {claimed:?}"
    );
    let (a, b, c) = (
        claim_of(&claimed, "a").clone(),
        claim_of(&claimed, "b").clone(),
        claim_of(&claimed, "c").clone(),
    );
    assert_eq!(a.lease_expires_at, at + TimeDelta::seconds(3));
    assert_eq!(b.lease_expires_at, at + TimeDelta::seconds(30));
    assert_eq!(c.lease_expires_at, at + TimeDelta::seconds(3));

    // `c` is renewed once, for its own lease; `a` never.
    sleep_until(&h, at + ms(1_500)).await;
    assert_eq!(dies.renew(&r1, &[c.run_id]).await.unwrap(), [c.run_id]);
    sleep_until(&h, at + ms(3_500)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["a"], "{beat:?}");
    assert_eq!(
        run_of(&h, a.run_id).await.unwrap().outcome,
        Some(Outcome::Abandoned)
    );
    assert_eq!(run_of(&h, c.run_id).await.unwrap().outcome, None);
    // The renewal gave `c` three seconds, not thirty.
    sleep_until(&h, at + ms(5_000)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["c"], "{beat:?}");
    assert_eq!(run_of(&h, b.run_id).await.unwrap().outcome, None);
}
