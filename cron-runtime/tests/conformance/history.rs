//! What a handler asks of the history (`Context::previous_success`, docs/runtime.md, "What a handler
//! knows"): the scheduled instant of its verb's latest run that succeeded before its own occurrence,
//! under any deployment of its module; never a failed, skipped or later run, nor another verb's.

use std::time::Duration;

use cron_runtime::store::{ClaimAction, Store};

use super::*;

/// What `store` answers for `verb` of [`MODULE`] before `before`.
async fn previous<S: Store>(store: &S, verb: &str, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
    store.previous_success(MODULE, verb, before).await.unwrap()
}

/// Claims the occurrence of `verb` due at `at`, once it is.
async fn claim_at<H: StoreUnderTest>(
    h: &H,
    store: &H::Store,
    runner: &Runner,
    verb: &str,
    at: DateTime<Utc>,
) -> Claim {
    sleep_until(h, at + ms(50)).await;
    let claimed = claim(store, runner).await;
    let run = claim_of(&claimed, verb).clone();
    assert_eq!(run.scheduled_at, at, "{claimed:?}");
    run
}

pub async fn the_previous_success_is_the_last_succeeded_occurrence_before_the_runs_own(
    h: impl StoreUnderTest,
) {
    // `a` is due every second and skips what is late (a tolerance of one second); `b` is triggered.
    settle(&h).await;
    let v1 = deployment(
        "billing@1",
        vec![skipping(job("a", SECONDLY)), job("b", YEARLY)],
    );
    let (store, runner) = replica_with(&h, short_tolerance(), &v1).await;
    let t1 = h.next_execution(MODULE, "a").await.unwrap();
    let far = t1 + TimeDelta::days(1);
    assert_eq!(previous(&store, "a", far).await, None, "nothing ran yet");
    // Another verb's success, and the same verb of another module, never count.
    let manual = h.trigger("b").await.unwrap();
    let claimed = claim(&store, &runner).await;
    assert_eq!(verbs(&claimed), ["b"]);
    finish_one(&store, &runner, &succeeded(&claimed.claims[0])).await;
    assert_eq!(previous(&store, "b", far).await, Some(manual));
    assert_eq!(previous(&store, "a", far).await, None);

    // t1 succeeds, t2 fails, t3 is skipped: late under `skip`.
    let first = claim_at(&h, &store, &runner, "a", t1).await;
    finish_one(&store, &runner, &succeeded(&first)).await;
    let t2 = t1 + TimeDelta::seconds(1);
    let second = claim_at(&h, &store, &runner, "a", t2).await;
    let failed = ended(&second, Outcome::Failed, Some("relay refused"));
    finish_one(&store, &runner, &failed).await;
    let t3 = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, t3 + ms(2_500)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claim_of(&claimed, "a").action, ClaimAction::Skipped);
    let next = h.next_execution(MODULE, "a").await.unwrap();
    assert!(next > t3 + TimeDelta::seconds(2), "{next} {t3}");

    // Strictly before the instant asked about; failed and skipped runs do not count.
    assert_eq!(previous(&store, "a", t1).await, None);
    assert_eq!(previous(&store, "a", t1 + ms(1)).await, Some(t1));
    assert_eq!(previous(&store, "a", t2).await, Some(t1));
    assert_eq!(previous(&store, "a", next).await, Some(t1));
    assert_eq!(
        store.previous_success("audit", "a", far).await.unwrap(),
        None
    );

    // The run of `next` fails and is retried: its attempts see the same answer, its own run not
    // counting (it runs) until it succeeds, and then only for what comes after it.
    let run = claim_at(&h, &store, &runner, "a", next).await;
    assert_eq!(previous(&store, "a", run.scheduled_at).await, Some(t1));
    let retried = Finish {
        retry_after: Some(Duration::from_millis(300)),
        ..ended(&run, Outcome::Failed, Some("relay refused"))
    };
    let Finished::Retrying { at: retry_at } = finish_one(&store, &runner, &retried).await else {
        panic!("the attempt is retried before the next occurrence");
    };
    sleep_until(&h, retry_at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let retry = claim_of(&claimed, "a").clone();
    assert_eq!((retry.run_id, retry.attempt), (run.run_id, 2));
    assert_eq!(previous(&store, "a", retry.scheduled_at).await, Some(t1));
    finish_one(&store, &runner, &succeeded(&retry)).await;
    assert_eq!(previous(&store, "a", next).await, Some(t1));
    assert_eq!(previous(&store, "a", next + ms(1)).await, Some(next));
    assert_eq!(previous(&store, "a", far).await, Some(next));

    // A deploy of the module: the new deployment's runs see the old one's successes, and the old
    // one's replica sees the new one's.
    let v2 = deployment(
        "billing@2",
        vec![skipping(job("a", SECONDLY)), job("c", YEARLY)],
    );
    let (new, new_runner) = replica_with(&h, short_tolerance(), &v2).await;
    let after_deploy = h.next_execution(MODULE, "a").await.unwrap();
    let run = claim_at(&h, &new, &new_runner, "a", after_deploy).await;
    assert_eq!(previous(&new, "a", run.scheduled_at).await, Some(next));
    finish_one(&new, &new_runner, &succeeded(&run)).await;
    assert_eq!(previous(&store, "a", far).await, Some(after_deploy));
    assert_eq!(previous(&new, "a", after_deploy).await, Some(next));
}
