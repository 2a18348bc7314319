//! A verb executing on two deployments' rows at once (a rolling deploy; docs/operations.md, "Manual
//! runs" and "Cancelling a run"): a trigger and a cancel read every executing row of the verb, not the
//! first one.

use std::time::Duration;

use chrono::Timelike;

use cron_runtime::admin::{Admin, AdminError};
use cron_runtime::store::{Finish, JobSpec, Outcome, Runner, Store};

use super::{AdminUnderTest, schema};
use crate::support::{deployment, job};

pub async fn a_run_in_flight_on_any_deployments_row_refuses_a_trigger_and_is_cancelled(
    db: &impl AdminUnderTest,
) {
    // The active deployment's row (the lower id) holds a regular run claimed ahead of its instant,
    // not in flight; the newer deployment's row holds a manual run in flight.
    let (admin, replica, runner) = two_deployments(db, |job| job).await;
    let claimed = replica
        .claim_due(&runner, Duration::from_secs(3601), 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1, "claimed ahead: {claimed:?}");
    let manual = db.run_by_hand("billing@2", "billing::report").await;

    let error = admin.trigger("report", None).await.unwrap_err();
    assert!(
        matches!(error, AdminError::Executing { run_id, .. } if run_id == manual),
        "{error}"
    );
    let cancelled = admin.cancel("report", None, None).await.unwrap();
    assert_eq!(cancelled.run_id, manual);
    assert!(!cancelled.ended);
}

pub async fn a_cancel_asks_the_run_in_flight_before_a_retry_claimed_ahead(
    db: &impl AdminUnderTest,
) {
    // The active deployment's row (the lower id) holds a retry claimed ahead of its instant; the
    // newer deployment's row holds a manual run in flight. The cancel asks the run in flight
    // (docs/operations.md, "Cancelling a run"); the retry is asked only when no run is in flight.
    let (admin, replica, runner) = two_deployments(db, crate::support::retried).await;
    let claimed = replica
        .claim_due(&runner, Duration::from_secs(3601), 10)
        .await
        .unwrap();
    let first = claimed.claims.first().expect("claimed").clone();
    let failed = Finish {
        outcome: Outcome::Failed,
        error: Some("relay refused".to_owned()),
        retry_after: Some(Duration::from_secs(60)),
        ..crate::support::succeeded(&first)
    };
    let finished = replica
        .finish(&runner, std::slice::from_ref(&failed), None)
        .await
        .single();
    assert!(finished.is_ok(), "{finished:?}");
    let retry = replica
        .claim_due(&runner, Duration::from_secs(3601), 10)
        .await
        .unwrap();
    let retry = retry
        .claims
        .first()
        .expect("the retry claimed ahead")
        .clone();
    assert_eq!(
        (retry.run_id, retry.attempt),
        (first.run_id, 2),
        "{retry:?}"
    );
    let manual = db.run_by_hand("billing@2", "billing::report").await;

    let cancelled = admin.cancel("report", None, None).await.unwrap();
    assert_eq!(cancelled.run_id, manual, "the run in flight is asked");
}

/// A replica of `billing@1` whose `billing::report` (`spec` applied to it) runs daily half an hour
/// from now, so that an occurrence claimed ahead stays ahead of its instant while a case runs
/// whenever it runs (an hourly one came due within a case near the hour), and `billing@2` deployed
/// beside it: the admin, the replica's store and its runner.
async fn two_deployments<D: AdminUnderTest>(
    db: &D,
    spec: impl FnOnce(JobSpec) -> JobSpec,
) -> (Admin, D::Store, Runner) {
    let ahead = chrono::Utc::now() + chrono::TimeDelta::minutes(30);
    let daily = format!("{} {} * * *", ahead.minute(), ahead.hour());
    let admin = db.admin();
    let replica = db.replica();
    let runner = replica
        .register(&deployment(
            "billing@1",
            vec![spec(job("billing::report", &daily))],
        ))
        .await
        .unwrap();
    let newer = schema("billing", &[("billing::report", &daily)]);
    admin.deploy("billing@2", &newer, None).await.unwrap();
    (admin, replica, runner)
}
