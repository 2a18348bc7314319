//! Overdue (docs/operations.md, "Overdue"): of the occurrences a replica expects to have succeeded, the
//! store finds those that have not (the job not paused, its deployment active, the occurrence the row's
//! own), and records each as reported once: exactly one call across the replicas says to notify.

use cron_runtime::store::{Expected, Overdue, Store};

use super::*;

/// How long after its instant job `a` expects each occurrence to have succeeded in these cases.
const WITHIN: TimeDelta = TimeDelta::seconds(1);

fn expected(verb: &str, occurrence: DateTime<Utc>) -> Expected {
    Expected {
        verb: verb.to_owned(),
        occurrence,
        by: occurrence + WITHIN,
    }
}

fn expecting(occurrence: DateTime<Utc>) -> Vec<Expected> {
    vec![expected("a", occurrence)]
}

/// Occurrence `occurrence` of `a` is overdue now; `notify`: this call reports it.
fn found(occurrence: DateTime<Utc>, notify: bool) -> Vec<Overdue> {
    vec![Overdue {
        verb: "a".to_owned(),
        occurrence,
        notify,
        outstanding: true,
    }]
}

async fn overdue<S: Store>(store: &S, runner: &Runner, occurrence: DateTime<Utc>) -> Vec<Overdue> {
    store.overdue(runner, &expecting(occurrence)).await.unwrap()
}

pub async fn an_overdue_occurrence_is_reported_once_across_the_replicas_until_one_succeeds(
    h: impl StoreUnderTest,
) {
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (one, r1) = replica(&h, &v1).await;
    let (two, r2) = replica(&h, &v1).await;
    let t1 = h.next_execution(MODULE, "a").await.unwrap();

    // An occurrence before the row's schedule started counting is not the row's; a verb the
    // deployment does not have is nothing.
    assert_eq!(overdue(&one, &r1, t1 - TimeDelta::days(1)).await, []);
    let unknown = [expected("c", t1)];
    assert_eq!(one.overdue(&r1, &unknown).await.unwrap(), []);

    // t1 fails: overdue, and the first replica to ask reports it; no one else, ever. Either replica
    // may own an occurrence of `a` (docs/runtime.md, "How work is spread"): the first one claims past
    // the grace, where it takes the occurrence whoever owns it.
    sleep_until(&h, t1 + past_the_grace()).await;
    let claimed = claim(&one, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    finish_one(
        &one,
        &r1,
        &ended(&run, Outcome::Failed, Some("relay refused")),
    )
    .await;
    assert_eq!(overdue(&two, &r2, t1).await, found(t1, true));
    assert_eq!(overdue(&one, &r1, t1).await, found(t1, false));
    assert_eq!(overdue(&two, &r2, t1).await, found(t1, false));

    // t2 comes while no replica runs it: overdue too, and two replicas asking at once report it once.
    let t2 = t1 + TimeDelta::seconds(10);
    sleep_until(&h, t2 + ms(50)).await;
    let (a, b) = tokio::join!(overdue(&one, &r1, t2), overdue(&two, &r2, t2));
    assert_eq!(a.len() + b.len(), 2, "{a:?} {b:?}");
    let notified = a.iter().chain(&b).filter(|o| o.notify).count();
    assert_eq!(notified, 1, "{a:?} {b:?}");

    // A success at t3 answers every occurrence at or before it.
    sleep_until(&h, t2 + past_the_grace()).await;
    let claimed = claim(&one, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    finish_one(&one, &r1, &succeeded(&run)).await;
    let t3 = run.scheduled_at;
    assert!(t3 >= t2, "{t3} {t2}");
    assert_eq!(overdue(&one, &r1, t3).await, []);
    assert_eq!(overdue(&one, &r1, t1).await, []);

    // A paused job is expected to run nothing, and an occurrence it skipped while paused is not
    // reported once it is resumed: it is overdue, but reported as if it had been.
    let t4 = h.next_execution(MODULE, "a").await.unwrap();
    h.pause("a").await;
    sleep_until(&h, t4 + ms(50)).await;
    assert_eq!(overdue(&one, &r1, t4).await, []);
    h.resume("a").await;
    assert_eq!(overdue(&one, &r1, t4).await, found(t4, false));

    // A deployment that is no longer active reports nothing: the active one's replicas do.
    let v2 = deployment("billing@2", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (three, r3) = replica(&h, &v2).await;
    three.heartbeat(&r3).await.unwrap();
    let t5 = t4 + TimeDelta::seconds(10);
    sleep_until(&h, t5 + ms(50)).await;
    assert_eq!(overdue(&one, &r1, t5).await, []);
}

pub async fn an_unknown_verb_among_the_expected_shifts_no_other(h: impl StoreUnderTest) {
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (one, r1) = replica(&h, &v1).await;
    let t1 = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, t1 + ms(50)).await;
    // `c` is no verb of the deployment: `a`'s occurrence is still `a`'s.
    let asked = [expected("c", t1), expected("a", t1)];
    assert_eq!(one.overdue(&r1, &asked).await.unwrap(), found(t1, true));
}

pub async fn an_occurrence_reported_before_a_deploy_is_not_reported_again_after_it(
    h: impl StoreUnderTest,
) {
    settle(&h).await;
    let v1 = deployment("billing@1", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (one, r1) = replica(&h, &v1).await;
    let t1 = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, t1 + ms(50)).await;
    let claimed = claim(&one, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    finish_one(&one, &r1, &ended(&run, Outcome::Failed, Some("broken"))).await;
    assert_eq!(overdue(&one, &r1, t1).await, found(t1, true));

    // v2 deploys `a` unchanged while it is still broken: the occurrence stays overdue, reported.
    let v2 = deployment("billing@2", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (two, r2) = replica(&h, &v2).await;
    two.heartbeat(&r2).await.unwrap();
    assert_eq!(overdue(&one, &r1, t1).await, []);
    assert_eq!(overdue(&two, &r2, t1).await, found(t1, false));
}

/// Two replicas of billing@1 (`a` every ten seconds); past the grace of `a`'s next occurrence, the
/// first claims it, whoever owns it: the replicas, the occurrence and its claim.
async fn two_replicas_one_claimed<H: StoreUnderTest>(
    h: &H,
) -> ((H::Store, Runner), (H::Store, Runner), DateTime<Utc>, Claim) {
    settle(h).await;
    let v1 = deployment("billing@1", vec![job("a", TEN_SECONDLY), job("b", YEARLY)]);
    let (one, r1) = replica(h, &v1).await;
    let two = replica(h, &v1).await;
    let t1 = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(h, t1 + past_the_grace()).await;
    let claimed = claim(&one, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    ((one, r1), two, t1, run)
}

pub async fn an_occurrence_that_succeeded_after_its_span_is_still_reported_once(
    h: impl StoreUnderTest,
) {
    let ((one, r1), (two, r2), t1, run) = two_replicas_one_claimed(&h).await;
    // The run ends after `WITHIN`, before any replica checked: late, reported once, overdue no more.
    sleep_until(&h, t1 + WITHIN + ms(200)).await;
    finish_one(&one, &r1, &succeeded(&run)).await;
    let late = vec![Overdue {
        verb: "a".to_owned(),
        occurrence: t1,
        notify: true,
        outstanding: false,
    }];
    assert_eq!(overdue(&two, &r2, t1).await, late);
    assert_eq!(overdue(&one, &r1, t1).await, []);
    assert_eq!(overdue(&two, &r2, t1).await, []);

    // One that succeeds within its span is never reported. It must end within `WITHIN` of its
    // instant however slow the store is: the replica that owns it claims it at its start (docs/runtime.md,
    // "How work is spread"), not past the grace, and it ends as the claim answers.
    let t2 = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, t2 + ms(50)).await;
    let mut owners = 0;
    for (store, runner) in [(&one, &r1), (&two, &r2)] {
        let claimed = claim(store, runner).await;
        for run in &claimed.claims {
            let finish = Finish {
                ended_at: Some(claimed.now),
                ..succeeded(run)
            };
            finish_one(store, runner, &finish).await;
            owners += 1;
        }
    }
    assert_eq!(owners, 1, "one replica owns t2");
    sleep_until(&h, t2 + WITHIN + ms(50)).await;
    assert_eq!(overdue(&one, &r1, t2).await, []);
}

pub async fn a_run_still_executing_past_its_span_is_overdue_and_reported_once(
    h: impl StoreUnderTest,
) {
    // Its handler hangs.
    let ((one, r1), (two, r2), t1, run) = two_replicas_one_claimed(&h).await;

    // Past its span the run still executes: the occurrence has not succeeded, so it is overdue,
    // reported by the first replica to ask and by no one after, for as long as the run goes on.
    sleep_until(&h, t1 + WITHIN + ms(200)).await;
    assert_eq!(overdue(&two, &r2, t1).await, found(t1, true));
    assert_eq!(overdue(&one, &r1, t1).await, found(t1, false));
    assert_eq!(overdue(&two, &r2, t1).await, found(t1, false));
    let executing = run_of(&h, run.run_id).await.unwrap();
    assert_eq!(executing.outcome, None, "{executing:?}");

    // It succeeds at last: overdue no more, and not reported again.
    finish_one(&one, &r1, &succeeded(&run)).await;
    assert_eq!(overdue(&one, &r1, t1).await, []);
    assert_eq!(overdue(&two, &r2, t1).await, []);
}
