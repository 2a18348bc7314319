//! Ending runs: a finish records the outcome and puts the job back to idle at its first occurrence after
//! the run's end, counting what the run skipped, and is fenced on the run (docs/runtime.md, "Overlap",
//! "Failures"; G4, docs/operations.md).

use std::time::Duration;

use cron_runtime::store::Store;

use super::*;

pub async fn a_failure_is_recorded_with_its_message_and_the_job_goes_on(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    let failed = ended(
        &claimed.claims[0],
        Outcome::Failed,
        Some("invoice service: 503"),
    );
    let finished = finish_one(&store, &runner, &failed).await;
    let Finished::Recorded { next_execution, .. } = finished else {
        panic!("{finished:?}")
    };
    assert!(next_execution.unwrap() > at);
    let run = run_of(&h, claimed.claims[0].run_id).await.unwrap();
    assert_eq!(run.outcome, Some(Outcome::Failed));
    assert_eq!(run.error.as_deref(), Some("invoice service: 503"));
    assert_eq!(h.next_execution(MODULE, "a").await, next_execution);
}

pub async fn a_finish_ends_the_run_when_its_handler_ended_not_when_it_is_recorded(
    h: impl StoreUnderTest,
) {
    // Two jobs that started on time and whose handlers ended a tenth of a second later, recorded only
    // three seconds after (one alone, one in a batch): what came after the end was not overlapped, so
    // the next occurrence is the one right after it, nothing is skipped, and the run finished then.
    let spec = deployment("billing@1", vec![job("a", SECONDLY), job("b", SECONDLY)]);
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 2);
    let ended_at = claimed.now + ms(100);
    sleep_until(&h, at + ms(3_000)).await;
    let finish = |index: usize| Finish {
        ended_at: Some(ended_at),
        ..succeeded(&claimed.claims[index])
    };
    let next = next_second(ended_at);
    let expected = Finished::Recorded {
        next_execution: Some(next),
        skipped: seconds_between(at, next) - 1,
    };
    assert_eq!(finish_one(&store, &runner, &finish(0)).await, expected);
    assert_eq!(finish_all(&store, &runner, &[finish(1)]).await, [expected]);
    for claim in &claimed.claims {
        let run = run_of(&h, claim.run_id).await.unwrap();
        assert_eq!(
            (run.skipped, run.finished_at),
            (seconds_between(at, next) - 1, Some(ended_at))
        );
    }
    // That next occurrence is more than the tolerance ago now: the next claim takes it, late, once.
    let again = claim(&store, &runner).await;
    assert_eq!(again.claims.len(), 2);
    assert!(
        again
            .claims
            .iter()
            .all(|c| c.late && c.scheduled_at == next),
        "{again:?}"
    );

    // An end after the store's now (a replica's clock mapped ahead of it) is taken as now.
    let before = h.now().await;
    let ahead = Finish {
        ended_at: Some(before + TimeDelta::hours(5)),
        ..succeeded(&again.claims[0])
    };
    let finished = finish_one(&store, &runner, &ahead).await;
    let after = h.now().await;
    let Finished::Recorded {
        next_execution: Some(later),
        skipped,
    } = finished
    else {
        panic!("{finished:?}")
    };
    assert!(
        later >= next_second(before) && later <= next_second(after),
        "{later} {before} {after}"
    );
    assert_eq!(skipped, seconds_between(next, later) - 1);
    let run = run_of(&h, again.claims[0].run_id).await.unwrap();
    assert!(run.finished_at < Some(later), "{run:?}");
}

pub async fn a_finish_records_when_the_handler_started_and_the_claim_when_it_claimed(
    h: impl StoreUnderTest,
) {
    // Claimed ahead of its instant; its handler started 300 ms after the instant and ended 100 ms
    // later (docs/operations.md, "The tables").
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at - ms(300)).await;
    let before = h.now().await;
    let claimed = claim_ahead(&store, &runner).await;
    let c = &claimed.claims[0];
    assert_eq!(c.scheduled_at, at);
    let run = run_of(&h, c.run_id).await.unwrap();
    // Claimed at the store's clock during the claim.
    let claimed_at = run.claimed_at.expect("a claim records when it claimed");
    assert!(
        before <= claimed_at && claimed_at <= claimed.now,
        "{before} {run:?} {claimed:?}"
    );
    // In flight: the planned start, its instant (or the claim, had the instant passed meanwhile).
    assert_eq!(run.started_at, Some(claimed_at.max(at)), "{run:?}");

    sleep_until(&h, at + ms(450)).await;
    let finish = Finish {
        started_at: Some(at + ms(300)),
        ended_at: Some(at + ms(400)),
        ..succeeded(c)
    };
    assert!(matches!(
        finish_one(&store, &runner, &finish).await,
        Finished::Recorded { .. }
    ));
    let run = run_of(&h, c.run_id).await.unwrap();
    assert_eq!(
        (run.claimed_at, run.started_at, run.finished_at),
        (Some(claimed_at), Some(at + ms(300)), Some(at + ms(400))),
        "{run:?}"
    );
}

pub async fn a_finish_with_the_wrong_run_or_runner_is_fenced(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (other_store, other) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Two replicas are live: a replica takes an occurrence it does not own only half a second past
    // its start (docs/runtime.md, "How work is spread"), so the claim waits past the grace, where
    // it takes the occurrence whoever owns it.
    sleep_until(&h, at + past_the_grace()).await;
    let claimed = claim(&store, &runner).await;
    let mut wrong = succeeded(&claimed.claims[0]);
    assert_eq!(
        finish_one(&other_store, &other, &wrong).await,
        Finished::Fenced
    );
    wrong.run_id += 1000;
    assert_eq!(finish_one(&store, &runner, &wrong).await, Finished::Fenced);
    let run = run_of(&h, claimed.claims[0].run_id).await.unwrap();
    assert_eq!(run.outcome, None, "still in flight");
}

pub async fn a_batch_records_the_same_as_single_finishes(h: impl StoreUnderTest) {
    // Twin jobs: `single{i}` is finished alone, `batch{i}` in one batch; both ended `i % 4` seconds
    // after their occurrence, so that they skipped from none to three occurrences.
    const N: usize = 150;
    let jobs = (0..N)
        .flat_map(|i| {
            [
                job(&format!("single{i}"), SECONDLY),
                job(&format!("batch{i}"), SECONDLY),
            ]
        })
        .collect();
    let (store, runner) = replica(&h, &deployment("billing@1", jobs)).await;
    let at = h.next_execution(MODULE, "single0").await.unwrap();
    sleep_until(&h, at + ms(4_200)).await;
    let claimed = store
        .claim_due(&runner, Duration::ZERO, 2 * N)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 2 * N);
    assert!(claimed.claims.iter().all(|c| c.scheduled_at == at));
    let finish = |claim: &Claim, i: usize| Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome: [Outcome::Succeeded, Outcome::Failed, Outcome::TimedOut][i % 3],
        error: (!i.is_multiple_of(3)).then(|| format!("error {i}")),
        ended_at: Some(at + TimeDelta::seconds((i % 4) as i64) + ms(100)),
        started_at: None,
        retry_after: None,
    };
    let singles: Vec<Finish> = (0..N)
        .map(|i| finish(claim_of(&claimed, &format!("single{i}")), i))
        .collect();
    // Given in reverse, to see that the results come back in the order given.
    let batch: Vec<Finish> = (0..N)
        .rev()
        .map(|i| finish(claim_of(&claimed, &format!("batch{i}")), i))
        .collect();

    let mut single_results = Vec::new();
    for finish in &singles {
        single_results.push(finish_one(&store, &runner, finish).await);
    }
    let mut batch_results = finish_all(&store, &runner, &batch).await;
    batch_results.reverse();
    assert_eq!(batch_results, single_results);
    assert!(
        single_results
            .iter()
            .any(|r| matches!(r, Finished::Recorded { skipped: 3, .. })),
        "{single_results:?}"
    );

    let runs = h.runs().await;
    let run = |run_id: i64| runs.iter().find(|r| r.run_id == run_id).unwrap();
    for i in 0..N {
        let single = h.next_execution(MODULE, &format!("single{i}")).await;
        let batched = h.next_execution(MODULE, &format!("batch{i}")).await;
        assert!(single.is_some(), "job {i}");
        assert_eq!(batched, single, "job {i}");
        let single = run(singles[i].run_id);
        let batched = run(batch[N - 1 - i].run_id);
        assert_eq!(
            (
                batched.outcome,
                batched.error.as_deref(),
                batched.skipped,
                batched.finished_at
            ),
            (
                single.outcome,
                single.error.as_deref(),
                single.skipped,
                single.finished_at
            ),
            "run of job {i}"
        );
        assert!(single.finished_at.is_some());
    }
}

pub async fn a_batch_fences_exactly_the_runs_this_runner_no_longer_holds(h: impl StoreUnderTest) {
    let spec = deployment(
        "billing@1",
        ["a", "b", "c", "d"]
            .into_iter()
            .map(|verb| job(verb, SECONDLY))
            .collect(),
    );
    let (frozen, r1) = replica_with(&h, short_lease(), &spec).await;
    let (alive, r2) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Two replicas are live, each owning a share of the four (docs/runtime.md, "How work is
    // spread"): past the grace, one replica's claim takes all four.
    sleep_until(&h, at + past_the_grace()).await;
    let claimed = claim(&frozen, &r1).await;
    assert_eq!(claimed.claims.len(), 4);
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|verb| Finish {
        ended_at: Some(claimed.now),
        ..succeeded(claim_of(&claimed, verb))
    });

    // `a` and `d` are renewed; `b` and `c` lose their lease and the other replica takes them back,
    // then runs `b` again (past the grace: the frozen replica still counts as live within the other's
    // lease, and may own it).
    sleep_until(&h, claimed.now + ms(1_000)).await;
    assert_eq!(
        frozen.renew(&r1, &[a.run_id, d.run_id]).await.unwrap(),
        [a.run_id, d.run_id]
    );
    sleep_until(&h, claimed.now + ms(2_500)).await;
    assert!(alive.heartbeat(&r2).await.unwrap().changed);
    let b_next = h.next_execution(MODULE, "b").await.unwrap();
    sleep_until(&h, b_next + past_the_grace()).await;
    let rerun = alive.claim_due(&r2, Duration::ZERO, 1).await.unwrap();
    assert_eq!(verbs(&rerun), ["b"]);
    let b_before = h.next_execution(MODULE, "b").await;
    let c_before = h.next_execution(MODULE, "c").await;
    assert_eq!(b_before, None, "`b` runs again");

    // The frozen replica comes back with its four runs (and `a` given twice).
    let results = finish_all(
        &frozen,
        &r1,
        &[a.clone(), b.clone(), c.clone(), d.clone(), a.clone()],
    )
    .await;
    assert!(
        matches!(results[0], Finished::Recorded { .. }),
        "{results:?}"
    );
    assert!(
        matches!(results[3], Finished::Recorded { .. }),
        "{results:?}"
    );
    assert_eq!(
        [results[1], results[2], results[4]],
        [Finished::Fenced; 3],
        "{results:?}"
    );

    // Nothing changed for the runs it no longer holds.
    assert_eq!(h.next_execution(MODULE, "b").await, b_before);
    assert_eq!(h.next_execution(MODULE, "c").await, c_before);
    for (verb, finish) in [("b", &b), ("c", &c)] {
        let run = run_of(&h, finish.run_id).await.unwrap();
        assert_eq!(run.outcome, Some(Outcome::Abandoned), "`{verb}`");
        assert!(run.error.as_deref().unwrap().contains("lease"), "{run:?}");
    }
    let rerun = run_of(&h, rerun.claims[0].run_id).await.unwrap();
    assert_eq!(rerun.outcome, None, "still in flight");
    // The runs it holds are recorded, and their jobs are idle with their next occurrence.
    for (finish, verb, result) in [(&a, "a", results[0]), (&d, "d", results[3])] {
        let run = run_of(&h, finish.run_id).await.unwrap();
        assert_eq!(run.outcome, Some(Outcome::Succeeded), "`{verb}`");
        assert_eq!(
            result,
            Finished::Recorded {
                next_execution: h.next_execution(MODULE, verb).await,
                skipped: 0
            },
            "`{verb}`"
        );
    }
}
