//! What a store logs for an operator (docs/operations.md, "When things go wrong"): a takeover, by key, on
//! both sides.

use cron_runtime::store::Store;

use super::*;
use crate::support::Logs;

pub async fn a_takeover_is_logged_by_key_on_both_sides(h: impl StoreUnderTest) {
    let logs = Logs::capture(tracing::Level::INFO);
    let (old, old_runner) = replica(&h, &deployment("billing@1", vec![job("a", YEARLY)])).await;
    let (_new, _) = replica(&h, &deployment("billing@2", vec![job("a", YEARLY)])).await;
    // The superseded replica learns it at its heartbeats, and says so once.
    old.heartbeat(&old_runner).await.unwrap();
    old.heartbeat(&old_runner).await.unwrap();

    let text = logs.text();
    let lines = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        lines("deployment `billing@1` took module `billing` over; none of it was active"),
        1,
        "{text}"
    );
    assert_eq!(
        lines("deployment `billing@2` took module `billing` over from `billing@1`"),
        1,
        "{text}"
    );
    assert_eq!(
        lines(
            "deployment `billing@1` of module `billing` was superseded by `billing@2`; this \
             replica claims nothing more, and its runs in flight finish"
        ),
        1,
        "{text}"
    );
}
