//! The operator API's shared suite: what `Admin` must answer on every database store, one `async fn`
//! per behaviour, driven only through [`Admin`] and [`Store`] and run against each store by
//! [`every_admin_case!`] (tests/pg_admin.rs, tests/sqlite_admin.rs). What needs a store's own SQL (rows
//! edited by hand, runs backdated for `prune`) stays in that store's own test file.

// Each case is used by every store's test binary.
#![allow(dead_code)]

use std::time::Duration;

use cron_runtime::admin::{Admin, AdminError, RunFilter};
use cron_runtime::store::{Finish, Outcome, Store};
use cron_schema::{Cron, MissedPolicy, RunOn, Schema, Verb};

use crate::support::{deployment, job};

mod audit;
mod executing;
pub use audit::*;
pub use executing::*;

/// A database store under test.
pub trait AdminUnderTest {
    /// The store.
    type Store: Store;

    /// A handle on the store as a replica (another process) would have it.
    fn replica(&self) -> Self::Store;

    /// The operator API on the same database.
    fn admin(&self) -> Admin;

    /// Records a manual run of `verb`, started now, in flight on its row of deployment `key`, with a
    /// lease of a minute, as a replica of a release without the overlap rule across deployments could
    /// have left it while another deployment's row of the verb executes; the run's id.
    fn run_by_hand(&self, key: &str, verb: &str) -> impl std::future::Future<Output = i64>;

    /// Moves every row of the audit trail `days` days into the past, as if its actions had been
    /// taken then.
    fn age_audit(&self, days: i64) -> impl std::future::Future<Output = ()>;
}

/// One test per case of this suite, each a function with the attribute `$attr` and the parameters
/// `$params` (what the attribute passes in) that runs the case on the store `$make` builds.
#[macro_export]
macro_rules! every_admin_case {
    ($attr:meta, $params:tt, $make:expr) => {
        $crate::every_admin_case!(@cases $attr, $params, $make,
            deploy_registers_ahead_and_refuses_what_a_key_cannot_be,
            verbs_and_modules_are_named_as_operators_name_them,
            a_paused_verb_is_not_claimed_until_resumed,
            a_trigger_runs_once_through_the_claim_and_shows_in_runs_and_status,
            a_job_on_every_replica_is_deployed_listed_with_each_replicas_last_run_and_paused,
            status_shows_each_jobs_missed_policy_and_catch_up_window,
            every_action_writes_one_row_naming_its_actor_and_a_refused_one_none,
            the_audit_trail_reads_by_verb_and_age_and_an_admin_acts_through_the_api_unless_told,
            the_runs_prune_keeps_an_old_audit_row_and_the_trails_own_prune_deletes_it,
            a_takeover_that_drops_an_outlived_override_writes_its_row,
            status_shows_the_occurrence_reported_overdue_until_one_succeeds,
            a_run_in_flight_on_any_deployments_row_refuses_a_trigger_and_is_cancelled,
            a_cancel_asks_the_run_in_flight_before_a_retry_claimed_ahead,
        );
    };
    (@cases $attr:meta, $params:tt, $make:expr, $($case:ident,)*) => {
        $(
            #[$attr]
            async fn $case $params {
                admin::$case(&$make).await;
            }
        )*
    };
}

const HOURLY: &str = "0 * * * *";
const EVERY_SECOND: &str = "* * * * * *";

fn schema(module: &str, verbs: &[(&str, &str)]) -> Schema {
    Schema::new(
        verbs
            .iter()
            .map(|(name, expression)| (module, Verb::new(*name, Cron::new(*expression)))),
    )
}

pub async fn deploy_registers_ahead_and_refuses_what_a_key_cannot_be(db: &impl AdminUnderTest) {
    let admin = db.admin();
    let first = schema("billing", &[("billing::send_invoices", HOURLY)]);
    let deployed = admin.deploy("billing@1", &first, None).await.unwrap();
    assert!(deployed.created);
    assert!(!deployed.active, "registered ahead: no replica runs it");
    assert_eq!(deployed.jobs.len(), 1);
    assert_eq!(deployed.jobs[0].change, Some("added"));
    assert!(deployed.jobs[0].matches);
    assert!(deployed.jobs[0].next_execution.is_some());
    let changes = deployed.changes.unwrap();
    assert_eq!(changes.compared_with, None);
    assert_eq!(changes.added, ["billing::send_invoices"]);

    let again = admin.deploy("billing@1", &first, None).await.unwrap();
    assert!(!again.created);
    assert_eq!(
        again.jobs,
        deployed
            .jobs
            .iter()
            .map(|j| {
                let mut j = j.clone();
                j.added = false;
                j
            })
            .collect::<Vec<_>>()
    );

    let other = schema("billing", &[("billing::send_invoices", "30 * * * *")]);
    let error = admin.deploy("billing@1", &other, None).await.unwrap_err();
    assert!(
        matches!(error, AdminError::KeyRegisteredWithOtherJobs(_)),
        "{error}"
    );
    assert!(error.is_invalid_input());
    let error = admin
        .deploy(
            "billing@1",
            &schema("shipping", &[("shipping::pack", HOURLY)]),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "deployment `billing@1` is registered for module `billing`, not `shipping`"
    );
    let error = admin
        .deploy(
            "billing@2",
            &schema("billing", &[("billing::x", "*/0 * * * *")]),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("invalid schema: verb `billing::x`: expression `*/0 * * * *`"),
        "{error}"
    );
    // Retries, backoff and `on` are the schema's, validated as the attribute validates them.
    let retrying = |cron: Cron| Schema::new([("billing", Verb::new("billing::x", cron))]);
    let error = admin
        .deploy(
            "billing@2",
            &retrying(Cron::new(HOURLY).backoff("30s")),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid schema: verb `billing::x`: a backoff without retries does nothing: it is the wait \
         before the first retry; set retries, or remove the backoff"
    );
    let error = admin
        .deploy(
            "billing@2",
            &retrying(Cron::new(HOURLY).retries(101).on(RunOn::EveryReplica)),
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("retries = 101 is too many"), "{error}");
    assert!(error.contains("cannot retry"), "{error}");
    // A job's own lease: bounded as the attribute bounds it (docs/attribute.md, "`lease`").
    for (lease, expected) in [
        ("2s", "lease `2s` is out of range: a lease is at least 3s"),
        ("8761h", "invalid lease: duration `8761h` is too long"),
        (
            "1d",
            "invalid lease: invalid duration `1d`; days are written in hours: `24h`",
        ),
    ] {
        let error = admin
            .deploy("billing@2", &retrying(Cron::new(HOURLY).lease(lease)), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{lease}: {error}");
    }
    let error = admin
        .deploy(
            "billing@2",
            &retrying(Cron::new(HOURLY).lease("10s").on(RunOn::EveryReplica)),
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("holds no lease"), "{error}");
    let error = admin.deploy(" billing@2", &first, None).await.unwrap_err();
    assert!(matches!(error, AdminError::InvalidKey { .. }), "{error}");

    // Once a replica of a build runs (billing@3), billing@2 is compared with it.
    let replica = db.replica();
    replica
        .register(&deployment(
            "billing@3",
            vec![job("billing::send_invoices", HOURLY)],
        ))
        .await
        .unwrap();
    let second = schema(
        "billing",
        &[
            ("billing::send_invoices", "30 * * * *"),
            ("billing::remind", HOURLY),
        ],
    );
    let deployed = admin.deploy("billing@2", &second, None).await.unwrap();
    let changes = deployed.changes.unwrap();
    assert_eq!(changes.compared_with.as_deref(), Some("billing@3"));
    assert_eq!(changes.added, ["billing::remind"]);
    assert_eq!(changes.changed.len(), 1);
    assert_eq!(changes.changed[0].verb, "billing::send_invoices");
    let status = admin.status(None).await.unwrap();
    assert_eq!(
        status.modules[0].active_deployment.as_deref(),
        Some("billing@3")
    );
    let keys: Vec<&str> = status.modules[0]
        .deployments
        .iter()
        .map(|d| d.key.as_str())
        .collect();
    assert_eq!(keys, ["billing@2", "billing@3", "billing@1"]);
    assert_eq!(status.modules[0].deployments[1].live_replicas, 1);
}

pub async fn verbs_and_modules_are_named_as_operators_name_them(db: &impl AdminUnderTest) {
    let admin = db.admin();
    let error = admin.pause("billing::send", None, None).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown verb `billing::send`; no verb is registered"
    );
    admin
        .deploy(
            "billing@1",
            &schema(
                "billing",
                &[
                    ("billing::send_invoices", HOURLY),
                    ("billing::reports::send_invoices", HOURLY),
                ],
            ),
            None,
        )
        .await
        .unwrap();
    admin
        .deploy(
            "shipping@1",
            &schema("shipping", &[("send_invoices", HOURLY)]),
            None,
        )
        .await
        .unwrap();
    admin
        .deploy(
            "audit@1",
            &schema("audit", &[("send_invoices", HOURLY)]),
            None,
        )
        .await
        .unwrap();

    let error = admin
        .resume("billing::send_invoice", None)
        .await
        .unwrap_err();
    assert!(error.is_invalid_input());
    assert_eq!(
        error.to_string(),
        "unknown verb `billing::send_invoice`; did you mean `billing::send_invoices`?"
    );
    let error = admin
        .pause("invoices", Some("billing"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, AdminError::UnknownVerb { .. }), "{error}");
    // Two verbs of billing end with `::send_invoices`.
    let error = admin
        .pause("send_invoices", Some("billing"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, AdminError::AmbiguousVerb { ref candidates, .. } if candidates.len() == 2),
        "{error}"
    );
    // A full name two modules have.
    let error = admin.trigger("send_invoices", None).await.unwrap_err();
    assert!(
        matches!(error, AdminError::VerbInSeveralModules { ref modules, .. } if modules == &["audit", "shipping"]),
        "{error}"
    );
    let error = admin.status(Some("shiping")).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown module `shiping`; expected one of: `audit`, `billing`, `shipping`"
    );
    let paused = admin
        .pause("send_invoices", Some("shipping"), None)
        .await
        .unwrap();
    assert_eq!(
        (paused.module.as_str(), paused.verb.as_str()),
        ("shipping", "send_invoices")
    );
    let error = admin
        .runs(&RunFilter {
            verb: Some("nothing".to_owned()),
            ..RunFilter::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(error, AdminError::UnknownVerb { .. }), "{error}");
}

pub async fn a_paused_verb_is_not_claimed_until_resumed(db: &impl AdminUnderTest) {
    let admin = db.admin();
    let replica = db.replica();
    let runner = replica
        .register(&deployment(
            "billing@1",
            vec![job("billing::tick", EVERY_SECOND)],
        ))
        .await
        .unwrap();
    let paused = admin.pause("tick", None, Some("INC-7")).await.unwrap();
    assert!(paused.paused && paused.changed);
    assert_eq!(paused.note.as_deref(), Some("INC-7"));
    assert_eq!(paused.deployments, 1);
    let again = admin.pause("tick", None, None).await.unwrap();
    assert!(again.paused && !again.changed);
    assert_eq!(
        again.note.as_deref(),
        Some("INC-7"),
        "a pause without a note keeps the note"
    );
    assert_eq!(again.paused_at, paused.paused_at);

    // Two occurrences come and go: neither is claimed.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let claimed = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(claimed.claims.is_empty(), "a paused verb was claimed");
    let status = admin.status(None).await.unwrap();
    let tick = &status.modules[0].jobs[0];
    assert!(tick.paused);
    assert_eq!(tick.overdue_secs, None, "a paused row is not overdue");

    let resumed = admin.resume("billing::tick", None).await.unwrap();
    assert!(!resumed.paused && resumed.changed);
    assert_eq!(resumed.note, None);
    // It continues from its first occurrence after now: the ones it missed are not run.
    let next = resumed.next_execution.unwrap();
    assert!(next > status.now, "{next} is not after the resume");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let claimed = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1);
    assert_eq!(claimed.claims[0].scheduled_at, next);
    let not_paused = admin.resume("billing::tick", None).await.unwrap();
    assert!(!not_paused.changed);
}

pub async fn a_job_on_every_replica_is_deployed_listed_with_each_replicas_last_run_and_paused(
    db: &impl AdminUnderTest,
) {
    let admin = db.admin();
    // `deploy` lists and counts it with the other jobs, without an occurrence.
    let file = Schema::new([
        ("billing", Verb::new("billing::send", Cron::new(HOURLY))),
        (
            "billing",
            Verb::new(
                "billing::refresh_cache",
                Cron::new(EVERY_SECOND).on(RunOn::EveryReplica),
            ),
        ),
    ]);
    let deployed = admin.deploy("billing@0", &file, None).await.unwrap();
    assert_eq!(deployed.jobs.len(), 2);
    assert_eq!(deployed.changes.unwrap().added.len(), 2);
    let refresh = deployed
        .jobs
        .iter()
        .find(|j| j.verb == "billing::refresh_cache")
        .unwrap();
    assert!(refresh.every_replica);
    assert_eq!(refresh.next_execution, None);

    let mut refresh = job("billing::refresh_cache", EVERY_SECOND);
    refresh.on = RunOn::EveryReplica;
    let spec = deployment("billing@1", vec![job("billing::send", HOURLY), refresh]);
    let (one, two) = (db.replica(), db.replica());
    let one_runner = one.register(&spec).await.unwrap();
    let two_runner = two.register(&spec).await.unwrap();
    let status = admin.status(None).await.unwrap();
    let listed = |status: &cron_runtime::admin::Status| {
        status.modules[0]
            .jobs
            .iter()
            .find(|j| j.verb == "billing::refresh_cache")
            .cloned()
            .expect("listed")
    };
    let job = listed(&status);
    assert!(job.every_replica);
    assert!(job.replica_runs.is_empty(), "no replica ran it yet");
    let next = job.next_execution.expect("its next occurrence");
    assert!(next > status.now && next <= status.now + chrono::TimeDelta::seconds(1));
    assert_eq!(job.overdue_secs, None);

    // Each replica's last run, as each reported it.
    let ran = |outcome, error: Option<&str>| {
        [cron_runtime::store::ReplicaRun {
            verb: "billing::refresh_cache".to_owned(),
            scheduled_at: next,
            finished_at: next + chrono::TimeDelta::milliseconds(5),
            outcome,
            error: error.map(str::to_owned),
        }]
    };
    one.every_replica(&one_runner, Some(&ran(Outcome::Succeeded, None)))
        .await
        .unwrap();
    two.every_replica(&two_runner, Some(&ran(Outcome::Failed, Some("cache down"))))
        .await
        .unwrap();
    let job = listed(&admin.status(None).await.unwrap());
    let mut outcomes: Vec<(&str, Option<&str>)> = job
        .replica_runs
        .iter()
        .map(|r| (r.outcome.as_str(), r.error.as_deref()))
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [("failed", Some("cache down")), ("succeeded", None)]
    );
    assert!(job.replica_runs.iter().all(|r| r.deployment == "billing@1"));
    let names: Vec<&str> = job
        .replica_runs
        .iter()
        .map(|r| r.replica.as_str())
        .collect();
    assert!(names.contains(&one_runner.name.as_str()), "{names:?}");

    // Paused by its short name, as `cronverb pause refresh_cache` does: both replicas read it.
    let paused = admin
        .pause("refresh_cache", None, Some("INC-9"))
        .await
        .unwrap();
    assert!(paused.paused && paused.changed);
    assert_eq!(paused.next_execution, None);
    for (store, runner) in [(&one, &one_runner), (&two, &two_runner)] {
        assert_eq!(
            store.every_replica(runner, None).await.unwrap(),
            ["billing::refresh_cache"]
        );
    }
    let job = listed(&admin.status(None).await.unwrap());
    assert!(job.paused);
    assert_eq!(job.next_execution, None, "a paused job shows no next run");
    let error = admin.trigger("refresh_cache", None).await.unwrap_err();
    assert!(matches!(error, AdminError::EveryReplica { .. }), "{error}");
    let resumed = admin.resume("refresh_cache", None).await.unwrap();
    assert!(!resumed.paused && resumed.changed);
    assert_eq!(resumed.next_execution, None, "its row has no occurrence");
    assert!(
        one.every_replica(&one_runner, None)
            .await
            .unwrap()
            .is_empty()
    );
    let claimed = one
        .claim_due(&one_runner, Duration::from_secs(2), 10)
        .await
        .unwrap();
    assert!(claimed.claims.is_empty(), "never claimed");
}

pub async fn a_trigger_runs_once_through_the_claim_and_shows_in_runs_and_status(
    db: &impl AdminUnderTest,
) {
    let admin = db.admin();
    let replica = db.replica();
    let runner = replica
        .register(&deployment(
            "billing@1",
            vec![job("billing::report", HOURLY)],
        ))
        .await
        .unwrap();
    let before = admin.status(None).await.unwrap();
    let next = before.modules[0].jobs[0].next_execution;
    let triggered = admin.trigger("report", None).await.unwrap();
    assert_eq!(triggered.deployment, "billing@1");
    assert_eq!(triggered.live_replicas, 1);
    assert!(!triggered.already_pending);
    let pending = admin.trigger("report", None).await.unwrap();
    assert!(pending.already_pending);
    assert_eq!(pending.requested_at, triggered.requested_at);

    let claimed = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims.len(), 1);
    let claim = &claimed.claims[0];
    assert_eq!(claim.scheduled_at, triggered.requested_at);
    let error = admin.trigger("report", None).await.unwrap_err();
    assert!(
        matches!(error, AdminError::Executing { run_id, .. } if run_id == claim.run_id),
        "{error}"
    );
    replica
        .finish(
            &runner,
            &[Finish {
                run_id: claim.run_id,
                job_id: claim.job_id,
                outcome: Outcome::Failed,
                error: Some("the relay said no".to_owned()),
                ended_at: None,
                started_at: None,
                retry_after: None,
            }],
            None,
        )
        .await
        .single()
        .unwrap();
    let again = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    assert!(again.claims.is_empty(), "a trigger runs once");

    let runs = admin
        .runs(&RunFilter {
            verb: Some("report".to_owned()),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].manual);
    assert_eq!(runs[0].outcome, "failed");
    assert_eq!(runs[0].error.as_deref(), Some("the relay said no"));
    assert_eq!(runs[0].deployment.as_deref(), Some("billing@1"));
    assert_eq!(runs[0].scheduled_at, triggered.requested_at);
    let status = admin.status(Some("billing")).await.unwrap();
    let report = &status.modules[0].jobs[0];
    assert_eq!(
        report.next_execution, next,
        "the regular schedule is unchanged"
    );
    assert_eq!(report.trigger_requested_at, None);
    let last = report.last_run.as_ref().unwrap();
    assert_eq!((last.id, last.manual), (claim.run_id, true));
    assert_eq!(
        admin
            .runs(&RunFilter {
                limit: 0,
                ..RunFilter::default()
            })
            .await
            .unwrap(),
        []
    );
}

pub async fn status_shows_each_jobs_missed_policy_and_catch_up_window(db: &impl AdminUnderTest) {
    // docs/operations.md, "status": the policy of each job and the window its late occurrences run in
    // (docs/runtime.md, "Missed runs"), none where nothing bounds it or nothing late runs.
    let with = |verb: &str, missed: MissedPolicy, catch_up: Option<u64>| {
        let mut job = job(verb, HOURLY);
        job.missed = missed;
        job.catch_up = catch_up.map(Duration::from_secs);
        job
    };
    db.replica()
        .register(&deployment(
            "billing@1",
            vec![
                with("billing::digest", MissedPolicy::Once, Some(2 * 3600)),
                with("billing::export", MissedPolicy::All, Some(24 * 3600)),
                with("billing::ping", MissedPolicy::Skip, None),
                with("billing::rollup", MissedPolicy::All, Some(300)),
                with("billing::tick", MissedPolicy::Once, None),
            ],
        ))
        .await
        .unwrap();
    let status = db.admin().status(None).await.unwrap();
    let shown: Vec<(&str, &str, Option<u64>)> = status.modules[0]
        .jobs
        .iter()
        .map(|j| (j.verb.as_str(), j.missed.as_str(), j.catch_up_secs))
        .collect();
    assert_eq!(
        shown,
        [
            ("billing::digest", "once", Some(7200)),
            ("billing::export", "all", Some(86_400)),
            ("billing::ping", "skip", None),
            ("billing::rollup", "all", Some(300)),
            ("billing::tick", "once", None),
        ]
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["modules"][0]["jobs"][3]["catch_up_secs"], 300);
    assert_eq!(
        json["modules"][0]["jobs"][4]["catch_up_secs"],
        serde_json::Value::Null
    );
}

/// `status` shows the occurrence a replica reported overdue until one at or after it succeeds, and not
/// while the job is paused: the store's record of the event (docs/operations.md, "Overdue").
pub async fn status_shows_the_occurrence_reported_overdue_until_one_succeeds(
    db: &impl AdminUnderTest,
) {
    use cron_runtime::store::Expected;
    let admin = db.admin();
    let replica = db.replica();
    let runner = replica
        .register(&deployment(
            "billing@1",
            vec![job("billing::tick", EVERY_SECOND)],
        ))
        .await
        .unwrap();
    let overdue_since =
        |status: &cron_runtime::admin::Status| status.modules[0].jobs[0].overdue_since;
    assert_eq!(overdue_since(&admin.status(None).await.unwrap()), None);

    // An occurrence fails and a replica's check reports it overdue.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let claimed = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    let run = claimed.claims[0].clone();
    let failed = Finish {
        run_id: run.run_id,
        job_id: run.job_id,
        outcome: Outcome::Failed,
        error: Some("relay refused".to_owned()),
        ended_at: None,
        started_at: None,
        retry_after: None,
    };
    replica.finish(&runner, &[failed], None).await.results[0]
        .as_ref()
        .unwrap();
    let expected = [Expected {
        verb: "billing::tick".to_owned(),
        occurrence: run.scheduled_at,
        by: run.scheduled_at + chrono::TimeDelta::seconds(1),
    }];
    let found = replica.overdue(&runner, &expected).await.unwrap();
    assert!(found[0].notify, "{found:?}");
    let status = admin.status(None).await.unwrap();
    assert_eq!(overdue_since(&status), Some(run.scheduled_at));
    let json = serde_json::to_value(&status).unwrap();
    assert!(
        json["modules"][0]["jobs"][0]["overdue_since"].is_string(),
        "{json}"
    );

    // Paused, it is expected to run nothing.
    admin.pause("billing::tick", None, None).await.unwrap();
    assert_eq!(overdue_since(&admin.status(None).await.unwrap()), None);
    admin.resume("billing::tick", None).await.unwrap();

    // A later occurrence succeeds: answered.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let claimed = replica
        .claim_due(&runner, Duration::ZERO, 10)
        .await
        .unwrap();
    let run = claimed.claims[0].clone();
    let succeeded = Finish {
        run_id: run.run_id,
        job_id: run.job_id,
        outcome: Outcome::Succeeded,
        error: None,
        ended_at: None,
        started_at: None,
        retry_after: None,
    };
    replica.finish(&runner, &[succeeded], None).await.results[0]
        .as_ref()
        .unwrap();
    assert_eq!(overdue_since(&admin.status(None).await.unwrap()), None);
}
