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

/// `missed = "all"` with a catch-up window of `window` seconds (the effective window a `JobSpec`
/// carries).
fn catching_up(mut job: JobSpec, window: u64) -> JobSpec {
    job.missed = MissedPolicy::All;
    job.catch_up = Some(Duration::from_secs(window));
    job
}

pub async fn a_late_job_under_missed_all_runs_every_occurrence_in_its_window_oldest_first(
    h: impl StoreUnderTest,
) {
    // docs/runtime.md, "Missed runs": down for six seconds, a window of four.
    let spec = deployment("billing@1", vec![catching_up(job("a", SECONDLY), 4)]);
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(6_300)).await;

    // The occurrences older than the window are one skipped run, counted, and the job goes on at the
    // window's first occurrence, due already.
    let claimed = claim(&store, &runner).await;
    let [skip] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(
        (skip.action, skip.late, skip.scheduled_at),
        (ClaimAction::Skipped, true, at)
    );
    let first = h.next_execution(MODULE, "a").await.unwrap();
    assert_eq!(first, at + ms(1_000 * i64::from(skip.skipped)));
    assert!(
        first > claimed.now - ms(4_000) && first <= claimed.now,
        "the window's first occurrence, due: {first} {claimed:?}"
    );
    let run = run_of(&h, skip.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.skipped),
        (Some(Outcome::Skipped), skip.skipped)
    );

    // Then every occurrence runs, one at a time, each with its own instant, until the job is on time.
    let mut expected = first;
    let mut caught_up = 0;
    loop {
        let claimed = claim(&store, &runner).await;
        let Some(c) = claimed.claims.first() else {
            break;
        };
        assert_eq!(claimed.claims.len(), 1, "one run at a time: {claimed:?}");
        if c.action == ClaimAction::Skipped {
            // The window moved past an occurrence while the others ran: skipped, counted, never run.
            expected += ms(1_000 * i64::from(c.skipped));
            continue;
        }
        assert_eq!((c.action, c.scheduled_at), (ClaimAction::Run, expected));
        // While it runs, nothing else of the job is claimed.
        assert!(claim(&store, &runner).await.claims.is_empty());
        let finished = finish_one(&store, &runner, &succeeded(c)).await;
        expected += ms(1_000);
        assert_eq!(
            finished,
            Finished::Recorded {
                next_execution: Some(expected),
                skipped: 0
            },
            "the next is the occurrence after its own, however late"
        );
        caught_up += 1;
        if !c.late {
            break;
        }
        assert!(caught_up < 20, "a catch-up ends");
    }
    assert!(caught_up >= 3, "{caught_up}");
    let runs = h.runs().await;
    let ran: Vec<_> = runs
        .iter()
        .filter(|r| r.outcome == Some(Outcome::Succeeded))
        .map(|r| r.scheduled_at)
        .collect();
    let mut sorted = ran.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ran.len(), sorted.len(), "each occurrence once: {runs:?}");
    assert!(ran.iter().all(|s| *s >= first), "{runs:?}");
}

pub async fn a_catch_up_window_bounds_missed_once(h: impl StoreUnderTest) {
    let mut once = job("a", SECONDLY);
    once.catch_up = Some(Duration::from_secs(2));
    let spec = deployment("billing@1", vec![once]);
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(5_300)).await;

    // The missed occurrence is older than the window: skipped, with those after it up to the window.
    let claimed = claim(&store, &runner).await;
    let [skip] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!((skip.action, skip.scheduled_at), (ClaimAction::Skipped, at));
    let first = h.next_execution(MODULE, "a").await.unwrap();
    assert!(first > claimed.now - ms(2_000), "{first} {claimed:?}");
    assert_eq!(first, at + ms(1_000 * i64::from(skip.skipped)));

    // The one inside runs once, late, and the job goes on after now, as `once` does.
    let claimed = claim(&store, &runner).await;
    let [c] = &claimed.claims[..] else {
        panic!("one claim: {claimed:?}")
    };
    assert_eq!(
        (c.action, c.late, c.scheduled_at),
        (ClaimAction::Run, true, first)
    );
    let before = h.now().await;
    let Finished::Recorded {
        next_execution: Some(next),
        ..
    } = finish_one(&store, &runner, &succeeded(c)).await
    else {
        panic!("recorded")
    };
    assert!(next >= next_second(before), "{next} {before}");
}

pub async fn a_manual_run_under_missed_all_keeps_the_occurrences_that_came_while_it_ran(
    h: impl StoreUnderTest,
) {
    // docs/operations.md, "Manual runs": under `missed = "all"` the regular occurrences that come while a
    // manual run executes are a catch-up's backlog, not an overlap to skip: they run after it, oldest
    // first, one at a time, each once (docs/runtime.md, "Missed runs").
    let spec = deployment("billing@1", vec![catching_up(job("a", SECONDLY), 60)]);
    let second = settle(&h).await;
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let regular = h.next_execution(MODULE, "a").await.unwrap();
    assert_eq!(regular, second + TimeDelta::seconds(1));
    let requested_at = h.trigger("a").await.unwrap();
    let claimed = claim(&store, &runner).await;
    let manual = claim_of(&claimed, "a").clone();
    assert_eq!(manual.scheduled_at, requested_at, "{claimed:?}");

    // Three regular occurrences come while it runs; none starts beside it.
    let came: Vec<_> = (0..3).map(|s| regular + TimeDelta::seconds(s)).collect();
    sleep_until(&h, came[2] + ms(300)).await;
    assert!(claim(&store, &runner).await.claims.is_empty());
    assert_eq!(
        finish_one(&store, &runner, &succeeded(&manual)).await,
        Finished::Recorded {
            next_execution: Some(regular),
            skipped: 0
        },
        "the first that came is next, none skipped"
    );

    // The backlog, oldest first, one at a time, as regular runs, until the job is on time.
    let mut ran = Vec::new();
    loop {
        let claimed = claim(&store, &runner).await;
        let Some(c) = claimed.claims.first().cloned() else {
            break;
        };
        assert_eq!(claimed.claims.len(), 1, "one run at a time: {claimed:?}");
        assert_eq!(c.action, ClaimAction::Run, "{claimed:?}");
        let finished = finish_one(&store, &runner, &succeeded(&c)).await;
        assert_eq!(
            finished,
            Finished::Recorded {
                next_execution: Some(c.scheduled_at + TimeDelta::seconds(1)),
                skipped: 0
            }
        );
        ran.push(c.scheduled_at);
        if !c.late {
            break;
        }
        assert!(ran.len() < 10, "a catch-up ends: {ran:?}");
    }
    assert_eq!(ran[..3], came[..], "none lost, in order: {ran:?}");

    let runs = h.runs().await;
    let manual_run = run_of(&h, manual.run_id).await.unwrap();
    assert!(
        manual_run.manual && manual_run.skipped == 0,
        "{manual_run:?}"
    );
    let regular_runs: Vec<_> = runs
        .iter()
        .filter(|r| !r.manual)
        .map(|r| (r.scheduled_at, r.outcome, r.skipped))
        .collect();
    let expected: Vec<_> = ran
        .iter()
        .map(|at| (*at, Some(Outcome::Succeeded), 0))
        .collect();
    assert_eq!(regular_runs, expected, "each occurrence once: {runs:?}");
}

/// A missed-run tolerance under twice the spread's grace is refused by every store given it directly,
/// not only by the runtime's builder: another replica may take an occurrence the grace after its
/// start (docs/runtime.md, "How work is spread"), and such a run would be late.
pub async fn a_missed_run_tolerance_under_twice_the_spreads_grace_is_refused(
    h: impl StoreUnderTest,
) {
    for tolerance in [Duration::ZERO, Duration::from_millis(999)] {
        let settings = StoreSettings {
            missed_tolerance: tolerance,
            ..defaults()
        };
        let Err(error) = h.with_settings(settings) else {
            panic!("a missed-run tolerance of {tolerance:?} was taken")
        };
        assert_eq!(
            error.to_string(),
            format!(
                "a missed-run tolerance of {tolerance:?}: must be at least 1 s, twice the spread's \
                 grace: another replica may take an occurrence 0.5 s after its start, and its run \
                 would be late"
            )
        );
    }
    // One second, the floor, is taken.
    assert!(h.with_settings(short_tolerance()).is_ok());
}
