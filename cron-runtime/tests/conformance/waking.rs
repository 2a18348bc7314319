//! Waking up: the end of a run tells the replicas of its module when its job is next due, so that a
//! replica holding nothing sleeps until then and no longer (docs/runtime.md, "Waking up"). The
//! in-memory store, whose replicas share one process, tells no one.

use std::time::Duration;

use cron_runtime::store::{Change, Finishing, Store};

use super::*;

pub async fn a_replica_that_held_nothing_hears_when_a_job_another_one_ran_is_next_due<
    H: StoreUnderTest,
>(
    h: H,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY), job("b", SECONDLY)]);
    let (runs_them, r1) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Alone, the first replica owns both occurrences (docs/runtime.md, "How work is spread") and its
    // claim at their start takes both; the other registers once it holds them. (Claiming past the
    // grace instead, with both live, left the case a few hundred milliseconds before the next
    // occurrence, which a finish on a loaded machine passed, chaining it.)
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&runs_them, &r1).await;
    assert_eq!(claimed.claims.len(), 2);
    let (survivor, r2) = replica(&h, &spec).await;
    // The other replica has nothing to claim and no idle job to wait for: only the end of the runs can
    // tell it when to wake up.
    let nothing = claim(&survivor, &r2).await;
    assert!(nothing.claims.is_empty(), "{nothing:?}");
    assert_eq!(nothing.next_due, None);

    // One run recorded alone, the other by a finish that claims what is due within its horizon (none
    // here): each end tells the other replica when its job is next due.
    let ended_at = claimed.now;
    let next = at + TimeDelta::seconds(1);
    let a = Finish {
        ended_at: Some(ended_at),
        ..succeeded(claim_of(&claimed, "a"))
    };
    let (_, change) = woken_by(&survivor, finish_one(&runs_them, &r1, &a)).await;
    let b = Finish {
        ended_at: Some(ended_at),
        ..ended(claim_of(&claimed, "b"), Outcome::Failed, Some("no"))
    };
    let ((results, chained), chained_change) = woken_by(&survivor, async {
        let Finishing { results, claimed } =
            runs_them.finish(&r1, &[b], Some(Duration::ZERO)).await;
        (results, claimed)
    })
    .await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(
        chained.as_ref().is_none_or(|c| c.claims.is_empty()),
        "{chained:?}"
    );
    for change in [change, chained_change] {
        // The database stores wake the other replicas: PostgreSQL with the instant (`DueAt`), SQLite
        // with a `Claim` (its watch carries no payload), whose answer says the same.
        if H::HEARTBEAT_HINTS {
            assert!(
                change.is_some(),
                "the replica that held nothing was not told"
            );
        }
        if let Some(Change::DueAt(at)) = change {
            assert_eq!(at, next);
        }
    }
    // The in-memory store wakes no one at the end of a run of the active deployment (its replicas share
    // one process and its executor's own claims say when). Whatever the store said, the replica that
    // held nothing claims both jobs at their next occurrence when the one that ran them is gone
    // (past the grace: it still counts as live, and may own them).
    sleep_until(&h, next + past_the_grace()).await;
    let claimed = claim(&survivor, &r2).await;
    assert_eq!(verbs(&claimed), ["a", "b"]);
    assert!(claimed.claims.iter().all(|c| c.scheduled_at == next));
}
