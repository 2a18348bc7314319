//! Schedule overrides (`cronverb reschedule`; docs/operations.md, "Changing a schedule without a
//! build"): an override moves the verb's next occurrence to its schedule and the row's later ones
//! follow it, a deployment registered later starts at it, `--reset` returns to the code's, and what does
//! not check is refused with nothing changed; a job its code marks `fixed` is never overridden.

use cron_runtime::store::Expected;

use super::*;

/// The replica of the first deployment, `old` (registered with [`short_lease`]), takes its module
/// back once the later one's replica, which stopped heartbeating, is no longer alive: a rollback.
async fn roll_back<H: StoreUnderTest>(h: &H, old: &H::Store, runner: &Runner) {
    let seen = h.now().await;
    sleep_until(h, seen + ms(2_500)).await;
    assert!(old.heartbeat(runner).await.unwrap().changed, "the rollback");
}

/// `job` with a schedule an operator may not override (`#[cron(..., fixed)]`).
pub fn fixed(mut job: JobSpec) -> JobSpec {
    job.fixed = true;
    job
}

/// `a` is due yearly by its code and every second by its override: its next occurrence is within a
/// second of now, and each run's end schedules the one a second later, as the override says.
pub async fn an_override_moves_the_next_occurrence_to_the_new_schedule(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let before = h.now().await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let at = h.next_execution(MODULE, "a").await.unwrap();
    assert!(
        at > before && at - before <= TimeDelta::seconds(2),
        "the override's next occurrence: {at} after {before}"
    );
    for round in 0..2 {
        let at = h.next_execution(MODULE, "a").await.unwrap();
        sleep_until(&h, at + ms(50)).await;
        let claimed = claim(&store, &runner).await;
        let a = claim_of(&claimed, "a");
        assert_eq!(a.scheduled_at, at, "round {round}: {claimed:?}");
        let Finished::Recorded {
            next_execution: Some(next),
            ..
        } = finish_one(&store, &runner, &succeeded(a)).await
        else {
            panic!("round {round}: the run's end schedules the next occurrence")
        };
        assert!(
            next > at && next - at <= TimeDelta::seconds(2),
            "round {round}: every second, as the override says: {next} after {at}"
        );
    }
}

/// A deployment of a new key, registered after the override, runs the override, not its code's.
pub async fn an_override_survives_a_deploy_of_a_new_key(h: impl StoreUnderTest) {
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let (new, runner) = replica(&h, &deployment("billing@2", vec![job("a", YEARLY)])).await;
    let now = h.now().await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    assert!(
        at - now <= TimeDelta::seconds(2),
        "billing@2's row starts at the override: {at} after {now}"
    );
    sleep_until(&h, at + ms(50)).await;
    let claimed = claim(&new, &runner).await;
    assert_eq!(claim_of(&claimed, "a").scheduled_at, at, "{claimed:?}");
}

/// What wins when the code's expression changes under an override (docs/operations.md, "Changing a
/// schedule without a build"): the override, until it is reset. A deployment whose code moves the
/// overridden verb to another expression runs the override, and `--reset` then returns the verb to the
/// new code's expression, not the old one's.
pub async fn a_deploy_that_changes_an_overridden_verbs_expression_runs_the_override_until_reset(
    h: impl StoreUnderTest,
) {
    const JULY: &str = "0 0 1 7 *";
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let (_new, _) = replica(&h, &deployment("billing@2", vec![job("a", JULY)])).await;
    let now = h.now().await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    assert!(
        at - now <= TimeDelta::seconds(2),
        "billing@2's row, whose code says `{JULY}`, runs the override: {at} after {now}"
    );
    h.reset_schedule("a").await;
    let july = zoned(JULY).next_after(h.now().await).unwrap();
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(july),
        "the reset returns to the new code's schedule"
    );
}

/// `--reset` puts the verb back on its code's schedule from its next occurrence, in the deployments
/// registered later too.
pub async fn a_reset_returns_to_the_codes_schedule(h: impl StoreUnderTest) {
    let (_store, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    h.reset_schedule("a").await;
    let now = h.now().await;
    let yearly = zoned(YEARLY).next_after(now).unwrap();
    assert_eq!(h.next_execution(MODULE, "a").await, Some(yearly));
    let (_new, _) = replica(&h, &deployment("billing@2", vec![job("a", YEARLY)])).await;
    assert_eq!(h.next_execution(MODULE, "a").await, Some(yearly));
}

/// An expression that does not parse, a jitter as long as the new schedule's interval, and a job on
/// every replica are refused, and the verb runs as it did.
pub async fn an_override_that_does_not_check_is_refused_and_changes_nothing(
    h: impl StoreUnderTest,
) {
    let mut jittered = job("b", YEARLY);
    jittered.jitter = Some(Duration::from_secs(30));
    let jobs = vec![
        job("a", YEARLY),
        jittered,
        on_every_replica(job("c", YEARLY)),
    ];
    let (_store, _) = replica(&h, &deployment("billing@1", jobs)).await;
    let yearly = h.next_execution(MODULE, "a").await;
    let bad = h.reschedule("a", "61 * * * *").await.unwrap_err();
    assert!(bad.contains("61"), "{bad}");
    let jitter = h.reschedule("b", "*/10 * * * * *").await.unwrap_err();
    assert!(jitter.contains("jitter"), "{jitter}");
    let every = h.reschedule("c", SECONDLY).await.unwrap_err();
    assert!(every.contains("every replica"), "{every}");
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
    let b = h.next_execution(MODULE, "b").await.unwrap();
    assert!(b - h.now().await > TimeDelta::seconds(10), "{b}");
}

/// A job its code marks `fixed` keeps its code's schedule: the override is refused, saying why, the
/// verb runs as it did, and no audit row records a refused action. A reset, which returns to the code's
/// schedule, is not refused.
pub async fn an_override_of_a_fixed_job_is_refused_and_audits_nothing(h: impl StoreUnderTest) {
    let (_store, _) = replica(&h, &deployment("billing@1", vec![fixed(job("a", YEARLY))])).await;
    let yearly = h.next_execution(MODULE, "a").await;
    let refused = h.reschedule("a", SECONDLY).await.unwrap_err();
    assert!(
        refused.contains("`a` is declared `fixed`") && refused.contains("cannot be overridden"),
        "{refused}"
    );
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
    assert!(
        matches!(h.operator().audited("reschedule").await, None | Some(0)),
        "a refused override writes no audit row"
    );
    h.reset_schedule("a").await;
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
    // A later deployment of the verb starts at its code's schedule: nothing was kept.
    let (_new, _) = replica(&h, &deployment("billing@2", vec![job("a", YEARLY)])).await;
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
}

/// A deployment whose code marks an overridden verb `fixed` runs the code's schedule, and its
/// registration drops the override: a later deployment that no longer marks the verb fixed runs its
/// code's schedule too (docs/operations.md, "Changing a schedule without a build": the code wins).
pub async fn a_deploy_that_marks_an_overridden_job_fixed_drops_the_override(
    h: impl StoreUnderTest,
) {
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let (_fixed, _) = replica(&h, &deployment("billing@2", vec![fixed(job("a", YEARLY))])).await;
    let yearly = Some(zoned(YEARLY).next_after(h.now().await).unwrap());
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        yearly,
        "billing@2's row runs its code's schedule"
    );
    let (_later, _) = replica(&h, &deployment("billing@3", vec![job("a", YEARLY)])).await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        yearly,
        "billing@3's row finds no override to run"
    );
}

/// The active deployment's row speaks for a verb: with an older deployment's row that is not fixed
/// still registered, an override of a verb the active code marks `fixed` is refused, and the active
/// row runs its code's schedule.
pub async fn the_active_deployments_fixed_row_refuses_an_override_an_older_row_would_take(
    h: impl StoreUnderTest,
) {
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    let (_fixed, _) = replica(&h, &deployment("billing@2", vec![fixed(job("a", YEARLY))])).await;
    let refused = h.reschedule("a", SECONDLY).await.unwrap_err();
    assert!(refused.contains("`a` is declared `fixed`"), "{refused}");
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        zoned(YEARLY).next_after(h.now().await)
    );
}

/// Rescheduling a verb to exactly its code's expression and zone returns it to its code's schedule
/// and keeps no override: a deployment whose code then changes the expression runs the new code's, not
/// an override nobody sees (docs/operations.md, "Changing a schedule without a build").
pub async fn an_override_to_the_codes_own_schedule_is_a_reset(h: impl StoreUnderTest) {
    let (_old, _) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    h.reschedule("a", YEARLY).await.unwrap();
    let yearly = zoned(YEARLY).next_after(h.now().await);
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
    const SECOND_OF_JANUARY: &str = "0 0 2 1 *";
    let (_new, _) = replica(
        &h,
        &deployment("billing@2", vec![job("a", SECOND_OF_JANUARY)]),
    )
    .await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        zoned(SECOND_OF_JANUARY).next_after(h.now().await),
        "billing@2 runs its code's schedule: no override was kept"
    );
    assert!(
        matches!(h.operator().audited("reschedule").await, None | Some(2)),
        "each reschedule asked is audited as one"
    );
}

/// An override made while an occurrence waits for its retry: the retry still runs at its instant, as
/// the next attempt of the same run, and the occurrence after it follows the override (docs/operations.md,
/// "Changing a schedule without a build").
pub async fn a_pending_retry_runs_at_its_instant_and_the_next_occurrence_follows_the_override(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", TEN_SECONDLY)]);
    let (store, runner, first, retry_at) =
        failed_awaiting_its_retry(&h, &spec, "a", Duration::from_secs(1)).await;
    h.reschedule("a", YEARLY).await.unwrap();
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(retry_at),
        "the pending retry keeps its instant"
    );
    sleep_until(&h, retry_at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let retry = claim_of(&claimed, "a");
    assert_eq!(
        (retry.run_id, retry.attempt, retry.retry_at),
        (first.run_id, 2, Some(retry_at)),
        "the retry is the same run's second attempt: {claimed:?}"
    );
    let finished = finish_one(&store, &runner, &succeeded(retry)).await;
    let yearly = zoned(YEARLY).next_after(h.now().await);
    assert_eq!(
        finished,
        Finished::Recorded {
            next_execution: yearly,
            skipped: 0
        },
        "the occurrence after the retry is the override's"
    );
    assert_eq!(h.next_execution(MODULE, "a").await, yearly);
}

/// `a` and `b` deployed as billing@1 (its replica registered with `settings`), `a` overridden to run
/// every second, then billing@2, whose code has only `b`, registered: it takes the module over and
/// drops the override. Billing@1's replica, and billing@2's store (kept, as a running replica is).
async fn overridden_then_removed<H: StoreUnderTest>(
    h: &H,
    settings: StoreSettings,
) -> (H::Store, Runner, H::Store) {
    let both = vec![job("a", YEARLY), job("b", YEARLY)];
    let (old, r1) = replica_with(h, settings, &deployment("billing@1", both)).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let without = deployment("billing@2", vec![job("b", YEARLY)]);
    let (without, _) = replica_with(h, settings, &without).await;
    (old, r1, without)
}

/// Billing@3 brings `a` back after [`overridden_then_removed`]: it runs its code's schedule, the
/// override gone with billing@2's takeover.
async fn brought_back_on_its_codes_schedule<H: StoreUnderTest>(h: &H) {
    let both = vec![job("a", YEARLY), job("b", YEARLY)];
    replica(h, &deployment("billing@3", both)).await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        zoned(YEARLY).next_after(h.now().await),
        "billing@3 brings `a` back on its code's schedule: its override went with billing@2's takeover"
    );
}

/// An override lives as long as its verb: the takeover of a deployment whose code has no such verb
/// drops it, so that a later deployment bringing the verb back runs its code's schedule, not an
/// override set for code that is gone (docs/operations.md, "Changing a schedule without a build").
pub async fn a_deployment_without_the_verb_drops_its_override_at_its_takeover(
    h: impl StoreUnderTest,
) {
    let (_old, _, _without) = overridden_then_removed(&h, defaults()).await;
    brought_back_on_its_codes_schedule(&h).await;
}

/// A takeover by a deployment that has the verb keeps its override, also a rollback to an older
/// deployment: only a deployment whose code lacks the verb drops it, at its own takeover.
pub async fn a_rollback_while_the_verb_stayed_keeps_its_override(h: impl StoreUnderTest) {
    let both = || vec![job("a", YEARLY), job("b", YEARLY)];
    let (old, r1) = replica_with(&h, short_lease(), &deployment("billing@1", both())).await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let (_new, _) = replica_with(&h, short_lease(), &deployment("billing@2", both())).await;
    // billing@2's replica stops heartbeating: once it is no longer alive, billing@1 takes over again.
    roll_back(&h, &old, &r1).await;
    let (_later, _) = replica(&h, &deployment("billing@3", both())).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    let now = h.now().await;
    assert!(
        at - now <= TimeDelta::seconds(2),
        "billing@3's row starts at the override, which was kept: {at} after {now}"
    );
}

/// An override starts its row's schedule anew, as a deployment's registration does: an occurrence of
/// the schedule it replaced, from before the override, is not the row's any more and is never
/// reported overdue, on every store (docs/operations.md, "Overdue").
pub async fn after_an_override_an_occurrence_of_its_schedule_from_before_it_is_not_overdue(
    h: impl StoreUnderTest,
) {
    settle(&h).await;
    let (store, runner) = replica(&h, &deployment("billing@1", vec![job("a", SECONDLY)])).await;
    let missed = h.next_execution(MODULE, "a").await.unwrap();
    // No replica runs it: past its deadline it is overdue.
    sleep_until(&h, missed + TimeDelta::seconds(1) + ms(100)).await;
    let expected = [Expected {
        verb: "a".to_owned(),
        occurrence: missed,
        by: missed + TimeDelta::seconds(1),
    }];
    let before = store.overdue(&runner, &expected).await.unwrap();
    assert_eq!(before.len(), 1, "overdue before the override: {before:?}");
    h.reschedule("a", YEARLY).await.unwrap();
    assert_eq!(
        store.overdue(&runner, &expected).await.unwrap(),
        [],
        "an occurrence of the schedule replaced, from before the override"
    );
}

/// Once a deployment without the verb has taken its module over (and dropped its override), a
/// reschedule of the verb is refused: it would keep an override no active code has, which no later
/// takeover drops, and a deployment that brings the verb back would start at it (docs/operations.md,
/// "Changing a schedule without a build").
pub async fn a_reschedule_of_a_verb_the_active_deployment_has_not_is_refused(
    h: impl StoreUnderTest,
) {
    let (_old, _, _without) = overridden_then_removed(&h, defaults()).await;
    let refused = h.reschedule("a", SECONDLY).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("billing@2") && e.contains("no such verb")),
        "billing@2 is active and has no `a`: {refused:?}"
    );
    brought_back_on_its_codes_schedule(&h).await;
}

/// The takeover that drops an outlived override returns every row of the verb, in the module's other
/// deployments, to its own code's schedule: a rollback after it runs the code's schedule, not an
/// override that no longer exists (docs/operations.md, "Changing a schedule without a build").
pub async fn a_rollback_after_the_takeover_that_dropped_the_override_runs_the_codes_schedule(
    h: impl StoreUnderTest,
) {
    let (old, r1, _without) = overridden_then_removed(&h, short_lease()).await;
    // billing@2's replica stops heartbeating: once it is no longer alive, billing@1 takes over again.
    roll_back(&h, &old, &r1).await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        zoned(YEARLY).next_after(h.now().await),
        "billing@1's row went back to its code's schedule at billing@2's takeover"
    );
}

/// A reschedule to the active code's own schedule is a reset on every row: each goes back to its own
/// code's schedule, also an older deployment's whose code declares another, so a rollback runs that
/// code's schedule (docs/operations.md, "Changing a schedule without a build").
pub async fn a_reschedule_to_the_active_codes_schedule_resets_every_row_to_its_own_code(
    h: impl StoreUnderTest,
) {
    let (old, r1) = replica_with(
        &h,
        short_lease(),
        &deployment("billing@1", vec![job("a", YEARLY)]),
    )
    .await;
    h.reschedule("a", SECONDLY).await.unwrap();
    let new = deployment("billing@2", vec![job("a", TEN_SECONDLY)]);
    let (_new, _) = replica_with(&h, short_lease(), &new).await;
    h.reschedule("a", TEN_SECONDLY).await.unwrap();
    roll_back(&h, &old, &r1).await;
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        zoned(YEARLY).next_after(h.now().await),
        "billing@1's row runs its own code's schedule after the reset"
    );
}
