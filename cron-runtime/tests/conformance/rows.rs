//! Rows edited in the database (G8, docs/operations.md): a row whose schedule text no longer parses is
//! reported once per row and text and left alone while the others run; a row edited by hand to another
//! schedule that parses is reported once and wins. These cases need a store whose rows are text: the
//! database stores ([`RowsUnderTest`]); the in-memory store holds its schedules parsed.

use std::time::Duration;

use cron_runtime::store::Store;

use super::*;
use crate::support::Logs;

/// A store whose job rows can be edited as an operator would with SQL.
pub trait RowsUnderTest: StoreUnderTest {
    /// Sets the schedule text of `verb`'s row in the active deployment of [`MODULE`], and its next
    /// occurrence to `next_execution`.
    fn edit_row(
        &self,
        verb: &str,
        expression: &str,
        next_execution: DateTime<Utc>,
    ) -> impl Future<Output = ()>;

    /// Deletes the record of run `run_id`, as an operator deleting history by hand would (or as a
    /// release before the run records left an executing row).
    fn delete_run(&self, run_id: i64) -> impl Future<Output = ()>;
}

/// The log lines that mention `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|line| line.contains(needle)).collect()
}

pub async fn a_bad_text_on_two_rows_is_reported_once_per_row_and_both_are_left_alone(
    h: impl RowsUnderTest,
) {
    let logs = Logs::capture(tracing::Level::WARN);
    let spec = deployment(
        "billing@1",
        vec![job("a", YEARLY), job("b", YEARLY), job("c", SECONDLY)],
    );
    let (store, runner) = replica(&h, &spec).await;
    // To the millisecond, which every store keeps exactly.
    let now = DateTime::from_timestamp_millis(h.now().await.timestamp_millis()).unwrap();
    h.edit_row("a", "61 * * * * *", now).await;
    h.edit_row("b", "61 * * * * *", now).await;
    for _ in 0..2 {
        store.heartbeat(&runner).await.unwrap();
        let at = h.next_execution(MODULE, "c").await.unwrap();
        sleep_until(&h, at + ms(50)).await;
        let claimed = claim(&store, &runner).await;
        assert_eq!(
            verbs(&claimed),
            ["c"],
            "only the good row runs: {claimed:?}"
        );
        finish_one(&store, &runner, &succeeded(&claimed.claims[0])).await;
    }
    let text = logs.text();
    let reports = lines_with(&text, "does not parse");
    assert_eq!(reports.len(), 2, "one report per row: {text}");
    assert_eq!(lines_with(&text, "of `a`").len(), 1, "{text}");
    assert_eq!(lines_with(&text, "of `b`").len(), 1, "{text}");
    // Left alone: idle at the instant they had.
    assert_eq!(h.next_execution(MODULE, "a").await, Some(now));
    assert_eq!(h.next_execution(MODULE, "b").await, Some(now));
}

pub async fn a_row_edited_by_hand_to_another_schedule_is_reported_once_and_wins(
    h: impl RowsUnderTest,
) {
    let logs = Logs::capture(tracing::Level::WARN);
    let spec = deployment("billing@1", vec![job("a", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let now = h.now().await;
    let due = next_second(now);
    h.edit_row("a", SECONDLY, due).await;
    for round in 0..2 {
        store.heartbeat(&runner).await.unwrap();
        let at = h.next_execution(MODULE, "a").await.unwrap();
        sleep_until(&h, at + ms(50)).await;
        let claimed = claim(&store, &runner).await;
        let a = claim_of(&claimed, "a");
        assert_eq!(a.scheduled_at, at, "round {round}: {claimed:?}");
        // The row's schedule, not the build's, decides what comes next.
        let finished = finish_one(&store, &runner, &succeeded(a)).await;
        let Finished::Recorded {
            next_execution: Some(next),
            ..
        } = finished
        else {
            panic!("{finished:?}")
        };
        assert!(
            next - at <= TimeDelta::seconds(2),
            "every second, as the row says: {next} after {at}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = logs.text();
    let reports = lines_with(&text, "the row wins");
    assert_eq!(reports.len(), 1, "reported once: {text}");
    assert!(
        reports[0].contains("`a`") && reports[0].contains(SECONDLY),
        "{text}"
    );
}

pub async fn a_row_put_back_on_an_occurrence_that_ran_is_moved_past_it(h: impl RowsUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let claimed = claim(&store, &runner).await;
    finish_one(&store, &runner, &succeeded(claim_of(&claimed, "a"))).await;
    // Put back by hand on the occurrence that ran: a claim does not run it again, and moves the row
    // past it, as an overlap would.
    h.edit_row("a", SECONDLY, at).await;
    let again = claim(&store, &runner).await;
    assert!(
        again.claims.iter().all(|c| c.scheduled_at != at),
        "ran twice: {again:?}"
    );
    let runs: Vec<RunView> = h
        .runs()
        .await
        .into_iter()
        .filter(|r| r.scheduled_at == at)
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    if let Some(next) = h.next_execution(MODULE, "a").await {
        assert!(next > at, "{next} is not past {at}");
    }
}

pub async fn a_bad_row_is_never_reported_due(h: impl RowsUnderTest) {
    // A claim's next due is when the executor claims again: a row that is never claimed must not be
    // it, or the executor would claim again at once, and again (docs/operations.md, G8).
    // Captured, as in the cases above: a log line first met by a test that has no subscriber would be
    // lost to the tests of this binary that capture it.
    let _logs = Logs::capture(tracing::Level::WARN);
    let spec = deployment("billing@1", vec![job("a", YEARLY), job("c", YEARLY)]);
    let (store, runner) = replica(&h, &spec).await;
    let yearly = h.next_execution(MODULE, "c").await;
    let now = DateTime::from_timestamp_millis(h.now().await.timestamp_millis()).unwrap();
    h.edit_row("a", "61 * * * * *", now).await;
    for _ in 0..2 {
        let claimed = claim(&store, &runner).await;
        assert!(claimed.claims.is_empty(), "{claimed:?}");
        assert_eq!(claimed.next_due, yearly, "{claimed:?}");
        store.heartbeat(&runner).await.unwrap();
    }
}

pub async fn a_job_on_every_replica_given_an_occurrence_by_hand_is_never_claimed(
    h: impl RowsUnderTest,
) {
    let spec = deployment(
        "billing@1",
        vec![job("a", SECONDLY), on_every_replica(job("e", SECONDLY))],
    );
    let (store, runner) = replica(&h, &spec).await;
    // As a release that does not know the mark would leave it after a takeover: due now.
    let now = DateTime::from_timestamp_millis(h.now().await.timestamp_millis()).unwrap();
    h.edit_row("e", SECONDLY, now).await;
    let beat = store.heartbeat(&runner).await.unwrap();
    let a = h.next_execution(MODULE, "a").await.unwrap();
    assert!(
        beat.next_due.is_none_or(|due| due > now),
        "not due by its row: {beat:?}"
    );
    sleep_until(&h, a + ms(1_200)).await;
    let claimed = claim(&store, &runner).await;
    assert_eq!(verbs(&claimed), ["a"], "{claimed:?}");
    assert!(
        claimed.next_due.is_none_or(|due| due > now),
        "not due by its row: {claimed:?}"
    );
}

pub async fn an_executing_row_whose_run_is_not_recorded_is_taken_back_when_its_lease_expires(
    h: impl RowsUnderTest,
) {
    // An executing row whose run has no record (history deleted by hand, an older release's row): its
    // replica died, and a live replica takes the row back when its lease expires (G4,
    // docs/operations.md), so that the job goes on; nothing is left executing for ever.
    taken_back_unrecorded(&h, job("a", TEN_SECONDLY)).await;
}

pub async fn an_unrecorded_run_of_a_job_with_retries_is_taken_back_with_no_retry(
    h: impl RowsUnderTest,
) {
    // The same with a job that retries: a run with no record has no attempts to add to, so it is not
    // retried (a retry would point at no run); the job goes on at its next regular occurrence, a new
    // run's first attempt (G4, docs/operations.md).
    taken_back_unrecorded(&h, crate::support::retried(job("a", TEN_SECONDLY))).await;
}

/// `a`'s run is claimed by a replica that dies, its record deleted; a live replica takes the row back
/// when its lease expires, and the job goes on at its next regular occurrence as a new run.
async fn taken_back_unrecorded<H: RowsUnderTest>(h: &H, a: JobSpec) {
    let spec = deployment("billing@1", vec![a]);
    let (dies, r1) = replica_with(h, short_lease(), &spec).await;
    let (alive, r2) = replica(h, &spec).await;
    let at = h.next_execution(MODULE, "a").await.unwrap();
    // Past the spread's grace, where either live replica takes the occurrence whoever owns it.
    sleep_until(h, at + past_the_grace()).await;
    let claimed = claim(&dies, &r1).await;
    let run = claim_of(&claimed, "a").clone();
    h.delete_run(run.run_id).await;

    sleep_until(h, run.lease_expires_at + ms(500)).await;
    let beat = alive.heartbeat(&r2).await.unwrap();
    assert_eq!(recovered_verbs(&beat), ["a"], "{beat:?}");
    let next = at + TimeDelta::seconds(10);
    assert_eq!(
        h.next_execution(MODULE, "a").await,
        Some(next),
        "idle again, at its next regular occurrence"
    );
    sleep_until(h, next + past_the_grace()).await;
    let claimed = claim(&alive, &r2).await;
    let again = claim_of(&claimed, "a");
    assert_eq!(
        (again.scheduled_at, again.attempt, again.retry_at),
        (next, 1, None),
        "a new run, no retry of the unrecorded one: {claimed:?}"
    );
    assert_ne!(again.run_id, run.run_id, "{claimed:?}");
}
