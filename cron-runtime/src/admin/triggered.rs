//! Which run a trigger caused: what `cronverb trigger --wait` waits for (docs/operations.md,
//! "Trigger"), read from the history through [`Admin::runs`].

use chrono::{DateTime, Utc};

use super::{Admin, AdminError, Run, RunCursor, RunFilter, Since, Triggered};

/// How many of the verb's latest runs are searched for a regular run that took the trigger. While
/// that run executes the verb starts no other (a job never overlaps itself), so it stays among the
/// latest until it has ended and been seen.
const RECENT_RUNS: u32 = 50;

/// [`Admin::triggered_run`].
pub(crate) async fn triggered_run(
    admin: &Admin,
    triggered: &Triggered,
) -> Result<Option<Run>, AdminError> {
    // The run at the trigger's instant: the manual run its claim recorded, or a regular occurrence at
    // that very instant, which took it. A verb has one run per instant of its module.
    let at = RunFilter {
        module: Some(triggered.module.clone()),
        verb: Some(triggered.verb.clone()),
        since: Some(Since::Instant(triggered.requested_at)),
        before: Some(RunCursor {
            scheduled_at: triggered.requested_at,
            id: i64::MAX,
        }),
        limit: 1,
    };
    if let Some(run) = admin.runs(&at).await?.into_iter().next() {
        return Ok(Some(run));
    }
    // A regular occurrence due when the trigger was claimed runs as a regular run and takes it.
    let recent = RunFilter {
        module: Some(triggered.module.clone()),
        verb: Some(triggered.verb.clone()),
        since: None,
        before: None,
        limit: RECENT_RUNS,
    };
    Ok(first_regular_claim_since(
        admin.runs(&recent).await?,
        triggered.requested_at,
    ))
}

/// The first regular run among `runs` claimed at or after `requested_at`, a trigger's instant: the claim
/// that took the trigger when no run is at its instant. A run recorded `skipped` does not take it, nor
/// does a later attempt of an occurrence first tried before the trigger.
fn first_regular_claim_since(runs: Vec<Run>, requested_at: DateTime<Utc>) -> Option<Run> {
    runs.into_iter()
        .filter(|run| {
            !run.manual
                && run.outcome != "skipped"
                && run
                    .claimed_at
                    .is_some_and(|claimed| claimed >= requested_at)
                && run.attempts.first().is_none_or(|first| {
                    first
                        .started_at
                        .is_none_or(|started| started >= requested_at)
                })
        })
        .min_by_key(|run| (run.claimed_at, run.id))
}

/// Whether `run` has ended: it has an outcome other than `running` or `retrying`.
pub(crate) fn ended(run: &Run) -> bool {
    run.finished_at.is_some() && run.outcome != "running" && run.outcome != "retrying"
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};

    use super::{Run, first_regular_claim_since};
    use crate::store::{Attempt, Outcome};

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_764_000_000 + secs, 0).unwrap()
    }

    fn run(id: i64, scheduled: i64, claimed: i64) -> Run {
        Run {
            id,
            module: "billing".to_owned(),
            verb: "billing::heartbeat".to_owned(),
            deployment: Some("billing@1".to_owned()),
            scheduled_at: at(scheduled),
            claimed_at: Some(at(claimed)),
            started_at: Some(at(claimed)),
            lateness_ms: Some(0),
            finished_at: None,
            outcome: "running".to_owned(),
            error: None,
            attempts: Vec::new(),
            retry_at: None,
            runner: "host:1".to_owned(),
            late: false,
            skipped: 0,
            manual: false,
            backfill: false,
        }
    }

    #[test]
    fn the_first_regular_claim_after_the_trigger_took_it() {
        // Newest first, as the history lists them.
        let runs = vec![run(4, 20, 20), run(3, 10, 10), run(2, 5, 6), run(1, 0, 0)];
        assert_eq!(
            first_regular_claim_since(runs.clone(), at(6)).map(|r| r.id),
            Some(2)
        );
        assert_eq!(first_regular_claim_since(runs, at(21)).map(|r| r.id), None);
    }

    #[test]
    fn skips_manual_runs_and_retries_of_older_occurrences_do_not_take_it() {
        let mut skipped = run(5, 7, 7);
        skipped.outcome = "skipped".to_owned();
        let mut manual = run(4, 8, 8);
        manual.manual = true;
        // Its second attempt was claimed after the trigger; its first started before.
        let mut retried = run(3, 0, 9);
        retried.attempts.push(Attempt {
            outcome: Outcome::Failed,
            error: Some("no".to_owned()),
            started_at: Some(at(0)),
            finished_at: at(1),
        });
        let regular = run(6, 10, 10);
        let runs = vec![regular, skipped, manual, retried];
        assert_eq!(
            first_regular_claim_since(runs, at(5)).map(|r| r.id),
            Some(6)
        );
    }
}
