//! Backfills by an operator (`cronverb backfill`, docs/operations.md "Backfill"): the occurrences of a
//! window that never ran are queued, and the claim runs them in order, one at a time, as manual runs
//! of their own instants recorded as backfills, never beside the job's regular runs; running the same
//! backfill twice repeats nothing, and a cancel stops what has not started.

use chrono::TimeZone;
use cron_runtime::store::Finishing;

use super::*;

fn new_year(year: i32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap()
}

/// Claims and succeeds every queued occurrence of `verb` one claim at a time, checking that each claim
/// takes one run of it and that nothing more is claimed for it while that run executes; the
/// occurrences run, in the order they ran.
async fn run_queue<S: Store>(store: &S, runner: &Runner, verb: &str) -> Vec<DateTime<Utc>> {
    let mut ran = Vec::new();
    loop {
        let claimed = claim(store, runner).await;
        let ours: Vec<&Claim> = claimed.claims.iter().filter(|c| c.verb == verb).collect();
        let Some(&run) = ours.first() else {
            return ran;
        };
        assert_eq!(ours.len(), 1, "one run of a job at a time: {claimed:?}");
        // A manual run of its own instant, never late, as every store reports it to the handler's
        // context (`Trigger::Backfill`).
        assert!(run.backfill && run.manual && !run.late, "{run:?}");
        let again = claim(store, runner).await;
        assert!(
            again.claims.iter().all(|c| c.verb != verb),
            "nothing of `{verb}` is claimed while its backfill's run executes: {again:?}"
        );
        assert!(matches!(
            finish_one(store, runner, &succeeded(run)).await,
            Finished::Recorded { .. }
        ));
        ran.push(run.scheduled_at);
        assert!(ran.len() <= 1000, "the queue never ends");
    }
}

pub async fn a_backfill_queues_what_never_ran_and_runs_it_in_order_as_backfills<
    H: StoreUnderTest,
>(
    h: H,
) {
    let spec = deployment("billing@1", vec![job("billing::rollup", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let next = h.next_execution(MODULE, "billing::rollup").await;
    let queued = h
        .backfill("billing::rollup", new_year(2020), new_year(2023))
        .await
        .unwrap();
    assert_eq!(queued, [new_year(2020), new_year(2021), new_year(2022)]);

    let ran = run_queue(&store, &runner, "billing::rollup").await;
    assert_eq!(ran, queued, "in order, each once");
    let runs = h.runs().await;
    assert_eq!(runs.len(), 3, "{runs:?}");
    for (run, at) in runs.iter().zip(&queued) {
        assert_eq!(run.scheduled_at, *at);
        assert_eq!(run.outcome, Some(Outcome::Succeeded));
        assert!(run.backfill && run.manual, "{run:?}");
    }
    assert_eq!(
        h.next_execution(MODULE, "billing::rollup").await,
        next,
        "the regular schedule is left alone"
    );
}

pub async fn a_backfill_waits_for_a_due_regular_occurrence_and_never_overlaps_it<
    H: StoreUnderTest,
>(
    h: H,
) {
    let (store, runner, queued, regular_at) = a_backfill_beside_a_due_regular_occurrence(&h).await;

    // The regular occurrence is due: it runs first, alone.
    let claimed = claim(&store, &runner).await;
    let regular = claim_of(&claimed, "billing::tick").clone();
    assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
    assert!(!regular.backfill);
    assert_eq!(regular.scheduled_at, regular_at);
    assert!(
        claim(&store, &runner).await.claims.is_empty(),
        "no backfill beside a regular run"
    );
    finish_one(&store, &runner, &succeeded(&regular)).await;

    // Idle, and the next regular occurrence not due: the earliest queued occurrence runs.
    let claimed = claim(&store, &runner).await;
    let backfilled = claim_of(&claimed, "billing::tick").clone();
    assert!(backfilled.backfill, "{claimed:?}");
    assert_eq!(backfilled.scheduled_at, queued[0]);
    // The next regular occurrence comes while it runs: nothing beside it.
    sleep_until(&h, regular_at + TimeDelta::seconds(1) + ms(50)).await;
    assert!(
        claim(&store, &runner).await.claims.is_empty(),
        "no regular run beside a backfill's"
    );
    finish_one(&store, &runner, &succeeded(&backfilled)).await;

    // The backfill yields to the schedule: the occurrence that came while it ran still runs, late
    // under the job's missed-run policy, and is not recorded skipped.
    let claimed = claim(&store, &runner).await;
    let came = claim_of(&claimed, "billing::tick").clone();
    assert!(!came.backfill, "{claimed:?}");
    assert_eq!(came.scheduled_at, regular_at + TimeDelta::seconds(1));
    finish_one(&store, &runner, &succeeded(&came)).await;

    let runs = h.runs().await;
    assert!(
        runs.iter()
            .all(|run| run.skipped == 0 && run.outcome != Some(Outcome::Skipped)),
        "nothing skipped for a backfill: {runs:?}"
    );
    for pair in runs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.finished_at.unwrap() <= b.claimed_at.unwrap(),
            "runs of one job never overlap: {runs:?}"
        );
    }
}

pub async fn a_backfill_run_twice_repeats_nothing<H: StoreUnderTest>(h: H) {
    let spec = deployment("billing@1", vec![job("billing::rollup", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let (from, to) = (new_year(2020), new_year(2024));
    assert_eq!(
        h.backfill("billing::rollup", from, to).await.unwrap().len(),
        4
    );
    // Queued already.
    assert_eq!(
        h.backfill("billing::rollup", from, to).await.unwrap(),
        Vec::<DateTime<Utc>>::new()
    );
    assert_eq!(run_queue(&store, &runner, "billing::rollup").await.len(), 4);
    // Ran already; a wider window queues only what is new.
    assert_eq!(
        h.backfill("billing::rollup", from, to).await.unwrap(),
        Vec::<DateTime<Utc>>::new()
    );
    assert_eq!(
        h.backfill("billing::rollup", new_year(2019), to)
            .await
            .unwrap(),
        [new_year(2019)]
    );
    assert_eq!(run_queue(&store, &runner, "billing::rollup").await.len(), 1);
    assert_eq!(h.runs().await.len(), 5);
}

pub async fn a_cancelled_backfill_runs_nothing_more<H: StoreUnderTest>(h: H) {
    let spec = deployment("billing@1", vec![job("billing::rollup", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    h.backfill("billing::rollup", new_year(2020), new_year(2023))
        .await
        .unwrap();
    let claimed = claim(&store, &runner).await;
    let first = claim_of(&claimed, "billing::rollup").clone();
    assert_eq!(first.scheduled_at, new_year(2020));
    // The run in flight goes on; the two not started are dropped.
    assert_eq!(h.operator().cancel_backfill("billing::rollup").await, 2);
    finish_one(&store, &runner, &succeeded(&first)).await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    let runs = h.runs().await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Succeeded));
    assert_eq!(h.operator().cancel_backfill("billing::rollup").await, 0);
}

pub async fn a_backfill_of_too_many_occurrences_is_refused<H: StoreUnderTest>(h: H) {
    let spec = deployment("billing@1", vec![job("billing::tick", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let from = new_year(2020);
    let refused = h
        .backfill("billing::tick", from, from + TimeDelta::days(2))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        "the backfill of `billing::tick` from 2020-01-01T00:00:00Z to 2020-01-03T00:00:00Z has \
         more than 100000 occurrences (the per-deployment job limit); backfill a shorter window, \
         one after the other"
    );
    let empty = h.backfill("billing::tick", from, from).await.unwrap_err();
    assert!(empty.contains("is empty"), "{empty}");
    // Nothing was queued.
    assert!(h.runs().await.is_empty());
    let claimed = claim(&store, &runner).await;
    assert!(claimed.claims.iter().all(|c| !c.backfill), "{claimed:?}");
}

pub async fn a_backfill_window_reaching_past_now_is_refused<H: StoreUnderTest>(h: H) {
    let spec = deployment("billing@1", vec![job("billing::tick", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let now = h.now().await;
    let from = DateTime::from_timestamp(now.timestamp() - 3, 0).unwrap();
    let to = from + TimeDelta::seconds(60);
    let refused = h.backfill("billing::tick", from, to).await.unwrap_err();
    assert!(
        refused.contains("after now") && refused.contains("`--to`"),
        "{refused}"
    );
    // Nothing was queued: no occurrence to come is claimed ahead of its instant, now or later.
    for _ in 0..3 {
        let claimed = claim(&store, &runner).await;
        assert!(claimed.claims.iter().all(|c| !c.backfill), "{claimed:?}");
        for c in &claimed.claims {
            assert!(c.scheduled_at <= claimed.now, "{claimed:?}");
            finish_one(&store, &runner, &succeeded(c)).await;
        }
    }
    assert!(h.runs().await.iter().all(|run| !run.backfill));
}

pub async fn regular_runs_come_before_backfills_under_the_replicas_cap<H: StoreUnderTest>(h: H) {
    let spec = deployment(
        "billing@1",
        vec![
            job("billing::tick", SECONDLY),
            job("billing::rollup", YEARLY),
        ],
    );
    let (store, runner) = replica(&h, &spec).await;
    let queued = h
        .backfill("billing::rollup", new_year(2020), new_year(2023))
        .await
        .unwrap();
    assert_eq!(queued.len(), 3);
    let due = h.next_execution(MODULE, "billing::tick").await.unwrap();
    sleep_until(&h, due + ms(100)).await;

    // One free slot: the regular occurrence takes it, though the queued ones are older.
    let full = store.claim_due(&runner, Duration::ZERO, 1).await.unwrap();
    assert_eq!(verbs(&full), ["billing::tick"], "{full:?}");
    assert!(!full.claims[0].backfill);
    // The next free slot takes the backfill.
    let next = store.claim_due(&runner, Duration::ZERO, 1).await.unwrap();
    assert_eq!(verbs(&next), ["billing::rollup"], "{next:?}");
    assert!(next.claims[0].backfill);
    assert_eq!(next.claims[0].scheduled_at, new_year(2020));
}

pub async fn a_backfill_of_a_job_under_missed_all_keeps_its_backlog_and_runs_nothing_twice<
    H: StoreUnderTest,
>(
    h: H,
) {
    // A backfill's run is a manual one: under `missed = "all"` the regular occurrences that came while
    // it ran are a backlog that runs after it, each once (docs/operations.md, "Backfill";
    // docs/runtime.md, "Missed runs"), and a queued occurrence the backlog ran meanwhile leaves the
    // queue without running again.
    let mut all = job("billing::tick", SECONDLY);
    all.missed = MissedPolicy::All;
    all.catch_up = Some(Duration::from_secs(60));
    let spec = deployment("billing@1", vec![all]);
    let (store, runner) = replica(&h, &spec).await;
    settle(&h).await;
    let from = new_year(2020);
    h.backfill("billing::tick", from, from + TimeDelta::seconds(1))
        .await
        .unwrap();
    let regular_at = h.next_execution(MODULE, "billing::tick").await.unwrap();
    sleep_until(&h, regular_at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let regular = claim_of(&claimed, "billing::tick").clone();
    assert!(
        !regular.backfill && regular.scheduled_at == regular_at,
        "{claimed:?}"
    );
    finish_one(&store, &runner, &succeeded(&regular)).await;

    // The backfill's run, while three regular occurrences come.
    let claimed = claim(&store, &runner).await;
    let backfilled = claim_of(&claimed, "billing::tick").clone();
    assert!(
        backfilled.backfill && backfilled.scheduled_at == from,
        "{claimed:?}"
    );
    let came: Vec<_> = (1..=3)
        .map(|s| regular_at + TimeDelta::seconds(s))
        .collect();
    sleep_until(&h, came[2] + ms(50)).await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    // Two of them queued too, as an operator backfilling what has not run yet would.
    assert_eq!(
        h.backfill("billing::tick", came[0], came[2]).await.unwrap(),
        came[..2]
    );
    finish_one(&store, &runner, &succeeded(&backfilled)).await;

    // The backlog, oldest first, one at a time, as regular runs; then nothing: the queued two ran.
    let mut ran = Vec::new();
    loop {
        let claimed = claim(&store, &runner).await;
        let Some(run) = claimed.claims.first().cloned() else {
            break;
        };
        assert_eq!(claimed.claims.len(), 1, "{claimed:?}");
        assert!(
            !run.backfill,
            "the backlog runs before the queue: {claimed:?}"
        );
        finish_one(&store, &runner, &succeeded(&run)).await;
        ran.push(run.scheduled_at);
        assert!(ran.len() <= 10, "{ran:?}");
    }
    assert_eq!(ran[..3], came[..], "none lost, in order");

    let runs = h.runs().await;
    let mut instants: Vec<_> = runs.iter().map(|run| run.scheduled_at).collect();
    instants.sort();
    instants.dedup();
    assert_eq!(
        instants.len(),
        runs.len(),
        "no occurrence runs twice: {runs:?}"
    );
    assert!(
        runs.iter()
            .all(|run| run.skipped == 0 && run.outcome == Some(Outcome::Succeeded)),
        "nothing skipped: {runs:?}"
    );
    assert_eq!(
        runs.iter().filter(|run| run.backfill).count(),
        1,
        "only the 2020 occurrence ran as a backfill: {runs:?}"
    );
}

pub async fn a_run_ending_while_a_backfill_is_queued_chains_nothing_and_the_claim_takes_the_queue<
    H: StoreUnderTest,
>(
    h: H,
) {
    // A regular occurrence claimed while a backfill is queued runs first; its end claims nothing more
    // (a chained claim would take the next regular occurrence, due within the horizon, and a replica
    // claiming ahead would never leave the queue a turn) and reports the row due at once, so the next
    // claim takes the queued occurrence while no regular one is due (docs/operations.md, "Backfill").
    let (store, runner, queued, regular_at) = a_backfill_beside_a_due_regular_occurrence(&h).await;
    let claimed = claim(&store, &runner).await;
    let regular = claim_of(&claimed, "billing::tick").clone();
    assert!(!regular.backfill && regular.scheduled_at == regular_at);

    // Ended as it was claimed, with a horizon of a second: the next regular occurrence is within it.
    let finish = Finish {
        ended_at: Some(claimed.now),
        ..succeeded(&regular)
    };
    let Finishing {
        results,
        claimed: chained,
    } = store
        .finish(
            &runner,
            std::slice::from_ref(&finish),
            Some(Duration::from_secs(1)),
        )
        .await;
    assert!(
        chained.is_none(),
        "nothing chained before the queue: {chained:?}"
    );
    assert_eq!(
        results.into_iter().next().unwrap().unwrap(),
        Finished::Recorded {
            next_execution: Some(claimed.now),
            skipped: 0
        },
        "the row is reported due at once, at the run's end"
    );
    let next = regular_at + TimeDelta::seconds(1);
    assert_eq!(
        h.next_execution(MODULE, "billing::tick").await,
        Some(next),
        "the regular schedule is left alone"
    );

    // The next regular occurrence is not due: the claim takes the earliest queued occurrence.
    let claimed = claim(&store, &runner).await;
    assert!(claimed.now < next, "the case ran late: {claimed:?}");
    let backfilled = claim_of(&claimed, "billing::tick").clone();
    assert!(backfilled.backfill, "{claimed:?}");
    assert_eq!(backfilled.scheduled_at, queued[0]);
    finish_one(&store, &runner, &succeeded(&backfilled)).await;
    let runs = h.runs().await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs.iter()
            .all(|run| run.outcome == Some(Outcome::Succeeded))
    );
}

pub async fn a_heartbeat_counts_a_queued_backfill_occurrence_of_an_idle_row<H: StoreUnderTest>(
    h: H,
) {
    // Nothing else wakes a replica for the queue once the row is idle: its heartbeat says the queued
    // occurrence is due (docs/operations.md, "Backfill"), unless the verb is paused.
    let spec = deployment("billing@1", vec![job("billing::rollup", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "billing::rollup").await;
    let before = store.heartbeat(&runner).await.unwrap();
    h.backfill("billing::rollup", new_year(2020), new_year(2022))
        .await
        .unwrap();
    let queued = store.heartbeat(&runner).await.unwrap();
    h.pause("billing::rollup").await;
    let paused = store.heartbeat(&runner).await.unwrap();
    if H::HEARTBEAT_HINTS {
        assert_eq!(before.next_due, yearly, "{before:?}");
        assert_eq!(queued.next_due, Some(new_year(2020)), "{queued:?}");
        assert_eq!(paused.next_due, None, "{paused:?}");
    } else {
        assert_eq!((before.next_due, queued.next_due), (None, None));
    }
}

/// An every-second job whose two occurrences of 2020's first seconds are queued for a backfill, with
/// its regular occurrence due 50 ms ago: the replica, its runner, the queued instants and the regular
/// occurrence's.
async fn a_backfill_beside_a_due_regular_occurrence<H: StoreUnderTest>(
    h: &H,
) -> (H::Store, Runner, Vec<DateTime<Utc>>, DateTime<Utc>) {
    let spec = deployment("billing@1", vec![job("billing::tick", SECONDLY)]);
    let (store, runner) = replica(h, &spec).await;
    settle(h).await;
    let from = new_year(2020);
    let queued = h
        .backfill("billing::tick", from, from + TimeDelta::seconds(2))
        .await
        .unwrap();
    assert_eq!(queued.len(), 2);
    let regular_at = h.next_execution(MODULE, "billing::tick").await.unwrap();
    sleep_until(h, regular_at + ms(50)).await;
    (store, runner, queued, regular_at)
}
