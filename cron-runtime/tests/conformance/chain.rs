//! Chained finishes: a finish may claim its job's next occurrence when a claim would take it then. A
//! store may also claim nothing (the in-memory store does not chain); either way the next occurrence
//! runs once, claimed by the finish or by the next claim.

use std::time::Duration;

use cron_runtime::store::{ClaimAction, Claimed, Finishing, Store};

use super::*;

/// A finish of `claim` at `ended_at`, claiming what is due within `chain`.
async fn finish_chained<S: Store>(
    store: &S,
    runner: &Runner,
    claim: &Claim,
    ended_at: DateTime<Utc>,
    chain: Duration,
) -> (Finished, Option<Claimed>) {
    let finish = Finish {
        ended_at: Some(ended_at),
        ..succeeded(claim)
    };
    let Finishing { results, claimed } = store
        .finish(runner, std::slice::from_ref(&finish), Some(chain))
        .await;
    let [result] = &results[..] else {
        panic!("one result: {results:?}")
    };
    (*result.as_ref().unwrap(), claimed)
}

/// The claim of `verb`'s occurrence at `at`: the one the finish chained, or else the one the next claim
/// takes (and nothing else of that verb is then to claim).
async fn next_claim<S: Store>(
    store: &S,
    runner: &Runner,
    chained: Option<Claimed>,
    verb: &str,
    at: DateTime<Utc>,
) -> Claim {
    let claim = match chained {
        Some(chained) => {
            assert_eq!(chained.next_due, None, "{chained:?}");
            let [claim] = &chained.claims[..] else {
                panic!("one claim: {chained:?}")
            };
            assert!(
                claim_ahead(store, runner)
                    .await
                    .claims
                    .iter()
                    .all(|c| c.verb != verb),
                "claimed twice"
            );
            claim.clone()
        }
        None => claim_of(&claim_ahead(store, runner).await, verb).clone(),
    };
    assert_eq!(
        (
            claim.verb.as_str(),
            claim.scheduled_at,
            claim.late,
            claim.action
        ),
        (verb, at, false, ClaimAction::Run)
    );
    claim
}

pub async fn a_finish_claims_the_next_occurrence_within_the_horizon_or_leaves_it_to_a_claim(
    h: impl StoreUnderTest,
) {
    let spec = deployment(
        "billing@1",
        vec![job("tick", SECONDLY), job("other", SECONDLY)],
    );
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "tick").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    let (tick, other) = (claim_of(&claimed, "tick"), claim_of(&claimed, "other"));

    // The tick's handler ended as it was claimed: its next occurrence is the second after, due within
    // the executor's horizon of a second.
    let next = next_second(claimed.now);
    let (result, chained) =
        finish_chained(&store, &runner, tick, claimed.now, Duration::from_secs(1)).await;
    assert_eq!(
        result,
        Finished::Recorded {
            next_execution: Some(next),
            skipped: 0
        }
    );
    // The same for `other`, with no horizon: its next occurrence is not claimed, and waits, idle.
    let (result, other_chained) =
        finish_chained(&store, &runner, other, claimed.now, Duration::ZERO).await;
    assert!(other_chained.is_none(), "{other_chained:?}");
    assert_eq!(
        result,
        Finished::Recorded {
            next_execution: Some(next),
            skipped: 0
        }
    );
    assert_eq!(h.next_execution(MODULE, "other").await, Some(next));

    let taken = next_claim(&store, &runner, chained, "tick", next).await;
    let lease = TimeDelta::seconds(30);
    assert!(taken.lease_expires_at >= claimed.now + lease, "{taken:?}");
    let run = run_of(&h, taken.run_id).await.unwrap();
    assert_eq!(
        (run.outcome, run.scheduled_at, run.runner.as_str()),
        (None, next, runner.name.as_str())
    );
    assert_eq!(
        run_of(&h, tick.run_id).await.unwrap().outcome,
        Some(Outcome::Succeeded)
    );

    // The run ended is over: its finish again is fenced. The next run goes on from there, and ends
    // a tenth of a second after its instant.
    assert_eq!(
        finish_one(&store, &runner, &succeeded(tick)).await,
        Finished::Fenced
    );
    sleep_until(&h, next + ms(100)).await;
    let after = next + TimeDelta::seconds(1);
    let (result, chained) = finish_chained(
        &store,
        &runner,
        &taken,
        next + ms(100),
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        result,
        Finished::Recorded {
            next_execution: Some(after),
            skipped: 0
        }
    );
    next_claim(&store, &runner, chained, "tick", after).await;
    assert_eq!(
        run_of(&h, taken.run_id).await.unwrap().outcome,
        Some(Outcome::Succeeded)
    );
}

pub async fn a_finish_leaves_a_late_or_moved_occurrence_to_a_claim(h: impl StoreUnderTest) {
    let spec = deployment(
        "billing@1",
        vec![job("late", SECONDLY), job("moved", SECONDLY)],
    );
    let (store, runner) = replica_with(&h, short_tolerance(), &spec).await;
    let at = h.next_execution(MODULE, "late").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(claimed.claims.len(), 2);

    // Recorded 2.5 s after its handler ended: its next occurrence is later than the missed-run
    // tolerance, which a claim decides.
    sleep_until(&h, at + ms(2_500)).await;
    let late = claim_of(&claimed, "late");
    let (result, chained) =
        finish_chained(&store, &runner, late, claimed.now, Duration::from_secs(1)).await;
    assert!(chained.is_none(), "{chained:?}");
    let next = next_second(claimed.now);
    assert!(
        matches!(result, Finished::Recorded { next_execution: Some(n), .. } if n == next),
        "{result:?}"
    );
    assert_eq!(h.next_execution(MODULE, "late").await, Some(next));
    let again = claim(&store, &runner).await;
    let again = claim_of(&again, "late");
    assert_eq!((again.scheduled_at, again.late), (next, true));

    // A newer deployment took the module over while the run executed: its verb goes on there.
    let newer = deployment("billing@2", vec![job("moved", SECONDLY)]);
    replica(&h, &newer).await;
    let moved = claim_of(&claimed, "moved");
    let (result, chained) = finish_chained(
        &store,
        &runner,
        moved,
        h.now().await,
        Duration::from_secs(1),
    )
    .await;
    assert!(chained.is_none(), "{chained:?}");
    assert!(matches!(result, Finished::Recorded { .. }), "{result:?}");
    assert!(h.next_execution(MODULE, "moved").await.is_some());
}
