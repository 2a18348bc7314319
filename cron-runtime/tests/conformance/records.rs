//! What a run's record says of its handler (docs/operations.md, "The tables").

use super::*;

pub async fn a_finish_of_a_handler_never_called_records_no_start(h: impl StoreUnderTest) {
    // This build has no handler for the job: the executor ends the run without calling one, and the
    // run records its end and no start, in a batch with a run that reports one.
    let spec = deployment("billing@1", vec![job("a", SECONDLY), job("b", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(500)).await;
    let claimed = claim(&store, &runner).await;
    let a = Finish {
        started_at: Some(at + ms(300)),
        ended_at: Some(at + ms(400)),
        ..succeeded(claim_of(&claimed, "a"))
    };
    let b = Finish {
        ended_at: Some(at + ms(400)),
        ..ended(claim_of(&claimed, "b"), Outcome::Failed, Some("no handler"))
    };
    finish_all(&store, &runner, &[a, b]).await;
    let a = run_of(&h, claim_of(&claimed, "a").run_id).await.unwrap();
    assert_eq!(
        (a.started_at, a.finished_at),
        (Some(at + ms(300)), Some(at + ms(400))),
        "{a:?}"
    );
    let b = run_of(&h, claim_of(&claimed, "b").run_id).await.unwrap();
    assert_eq!(
        (b.outcome, b.started_at, b.finished_at),
        (Some(Outcome::Failed), None, Some(at + ms(400))),
        "a handler never called has no start: {b:?}"
    );
    assert_eq!(b.claimed_at, a.claimed_at);
}
