//! The operator commands of the PostgreSQL store (`deploy`, `status`, `runs`, `pause`, `resume`, `trigger`,
//! `prune`) against a real server, one fresh database per test (`#[sqlx::test]`, which needs
//! `DATABASE_URL`): the operator API's shared suite (tests/admin), and what needs this store's own SQL
//! or is not yet in that suite. How a pause, a resume and a trigger meet the schedule is the store
//! conformance suite's (tests/conformance/operator.rs), on every store.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron_runtime::admin::{Actor, AdminError, Origin, RunFilter, Since};
use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{Claimed, DeploymentSpec, Finish, Finished, Outcome, Runner, Store};
use cron_schema::{Cron, MissedPolicy, Schedule, Schema, Verb, ZonedSchedule};
use sqlx::PgPool;
use support::{deployment, job, succeeded};

mod admin;
mod support;

/// The operator API's shared suite (tests/admin) on a fresh database per case.
struct Pg(PgPool);

impl admin::AdminUnderTest for Pg {
    type Store = PgStore;

    fn replica(&self) -> PgStore {
        PgStore::from_pool(self.0.clone())
    }

    fn admin(&self) -> cron_runtime::admin::Admin {
        PgStore::from_pool(self.0.clone()).admin()
    }

    async fn run_by_hand(&self, key: &str, verb: &str) -> i64 {
        sqlx::query_scalar(
            "WITH j AS (
                 SELECT j.id, j.deployment_id, j.module_name, j.verb FROM cron_jobs j
                 JOIN cron_deployments d ON d.id = j.deployment_id
                 WHERE d.key = $1 AND j.verb = $2),
             r AS (
                 INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at,
                     claimed_at, started_at, runner, runner_id, manual)
                 SELECT id, deployment_id, module_name, verb, now(), now(), now(), 'old:1', 0, true
                 FROM j
                 RETURNING id, job_id)
             UPDATE cron_jobs SET state = 'executing', current_run_id = r.id,
                 lease_expires_at = now() + interval '1 minute'
             FROM r WHERE cron_jobs.id = r.job_id
             RETURNING r.id",
        )
        .bind(key)
        .bind(verb)
        .fetch_one(&self.0)
        .await
        .unwrap()
    }

    async fn age_audit(&self, days: i64) {
        sqlx::query("UPDATE cron_audit SET at = at - make_interval(days => $1)")
            .bind(i32::try_from(days).unwrap())
            .execute(&self.0)
            .await
            .unwrap();
    }
}

every_admin_case!(sqlx::test(migrations = "./migrations"), (pool: PgPool), Pg(pool));

const HOURLY: &str = "0 * * * *";
const MINUTELY: &str = "* * * * *";

fn schema(verbs: &[(&str, Cron)]) -> Schema {
    Schema::new(
        verbs
            .iter()
            .map(|(name, cron)| ("billing", Verb::new(*name, cron.clone()))),
    )
}

async fn replica(pool: &PgPool, spec: &DeploymentSpec) -> (PgStore, Runner) {
    let store = PgStore::from_pool(pool.clone());
    let runner = store.register(spec).await.unwrap();
    (store, runner)
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn claim(store: &PgStore, runner: &Runner) -> Claimed {
    store.claim_due(runner, Duration::ZERO, 100).await.unwrap()
}

async fn finish(store: &PgStore, runner: &Runner, claimed: &Claimed) -> Finished {
    finish_as(store, runner, claimed, Outcome::Succeeded, None).await
}

/// Records the first run of `claimed` as `outcome`, asking for a retry `retry_after` it.
async fn finish_as(
    store: &PgStore,
    runner: &Runner,
    claimed: &Claimed,
    outcome: Outcome,
    retry_after: Option<Duration>,
) -> Finished {
    let claim = &claimed.claims[0];
    store
        .finish(
            runner,
            &[Finish {
                outcome,
                retry_after,
                ..succeeded(claim)
            }],
            None,
        )
        .await
        .single()
        .unwrap()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

// ---------------------------------------------------------------------------------------------------
// deploy

#[sqlx::test(migrations = "./migrations")]
async fn deploy_registers_ahead_without_taking_over(pool: PgPool) {
    let (_old, _old_runner) = replica(
        &pool,
        &deployment("billing@1", vec![job("billing::send", HOURLY)]),
    )
    .await;
    let store = PgStore::from_pool(pool.clone());
    let schema = schema(&[
        ("billing::send", Cron::new(HOURLY)),
        (
            "billing::report",
            Cron::new("0 2 * * *")
                .timezone("Europe/Berlin")
                .timeout("10m"),
        ),
    ]);

    let deployed = store
        .admin()
        .deploy("billing@2", &schema, None)
        .await
        .unwrap();
    assert_eq!(deployed.module, "billing");
    assert!(deployed.created);
    assert!(!deployed.active, "registering ahead must not take over");
    let verbs: Vec<(&str, bool, bool)> = deployed
        .jobs
        .iter()
        .map(|j| (j.verb.as_str(), j.added, j.matches))
        .collect();
    assert_eq!(
        verbs,
        [
            ("billing::report", true, true),
            ("billing::send", true, true)
        ]
    );
    assert!(deployed.jobs[0].next_execution.unwrap() > db_now(&pool).await);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM cron_runners WHERE deployment_id = (SELECT id FROM cron_deployments WHERE key = 'billing@2')").await,
        0
    );
    let status = store.admin().status(None).await.unwrap();
    assert_eq!(
        status.modules[0].active_deployment.as_deref(),
        Some("billing@1")
    );

    // Again: idempotent, nothing added.
    let again = store
        .admin()
        .deploy("billing@2", &schema, None)
        .await
        .unwrap();
    assert!(!again.created);
    assert!(again.jobs.iter().all(|j| !j.added && j.matches));

    // A replica of the key uses the rows registered ahead, and takes over.
    let ids_before: Vec<i64> = sqlx::query_scalar(
        "SELECT j.id FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.key = 'billing@2' ORDER BY j.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut report = job("billing::report", "0 2 * * *");
    report.zone = Tz::Europe__Berlin;
    report.schedule = ZonedSchedule::new(Schedule::parse("0 2 * * *").unwrap(), report.zone);
    // The same build: it registers the schema that was deployed.
    let built = DeploymentSpec {
        schema: serde_json::to_string(&schema).unwrap(),
        ..deployment("billing@2", vec![job("billing::send", HOURLY), report])
    };
    let (_new, _runner) = replica(&pool, &built).await;
    let ids_after: Vec<i64> = sqlx::query_scalar(
        "SELECT j.id FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.key = 'billing@2' ORDER BY j.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(ids_before, ids_after);
    let status = store.admin().status(None).await.unwrap();
    let billing = &status.modules[0];
    assert_eq!(billing.active_deployment.as_deref(), Some("billing@2"));
    assert_eq!(billing.deployments[0].key, "billing@2");
    assert_eq!(billing.deployments[0].live_replicas, 1);
}

#[sqlx::test(migrations = "./migrations")]
async fn deploy_refuses_an_invalid_schema_and_changes_nothing(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    let bad = schema(&[
        ("billing::a", Cron::new("0 9 * * MON")),
        ("billing::b", Cron::new(HOURLY).timezone("Mars/Olympus")),
        ("billing::c", Cron::new(HOURLY).timeout("ten minutes")),
        ("billing::d", Cron::new(HOURLY)),
    ]);
    let error = store
        .admin()
        .deploy("billing@1", &bad, None)
        .await
        .unwrap_err();
    assert!(error.is_invalid_input());
    let message = error.to_string();
    for part in [
        "`billing::a`",
        "`MON`",
        "`billing::b`",
        "Mars/Olympus",
        "`billing::c`",
    ] {
        assert!(message.contains(part), "{part} not in: {message}");
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM cron_deployments").await,
        0
    );

    let two = Schema::new([
        ("billing", Verb::new("billing::a", Cron::new(HOURLY))),
        ("shipping", Verb::new("shipping::b", Cron::new(HOURLY))),
    ]);
    let error = store.admin().deploy("x@1", &two, None).await.unwrap_err();
    assert!(
        matches!(error, AdminError::ModuleRequired { .. }),
        "{error}"
    );
    let error = store
        .admin()
        .deploy("x@1", &two, Some("nope"))
        .await
        .unwrap_err();
    assert!(matches!(error, AdminError::UnknownModule { .. }), "{error}");
    let deployed = store
        .admin()
        .deploy("shipping@1", &two, Some("shipping"))
        .await
        .unwrap();
    assert_eq!(deployed.module, "shipping");

    // A key is one module's.
    let error = store
        .admin()
        .deploy(
            "shipping@1",
            &schema(&[("billing::a", Cron::new(HOURLY))]),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "deployment `shipping@1` is registered for module `shipping`, not `billing`"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM cron_deployments").await,
        1
    );
}

#[sqlx::test(migrations = "./migrations")]
async fn deploy_refuses_a_key_registered_with_other_jobs_and_changes_nothing(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    let v1 = schema(&[
        ("billing::send", Cron::new(HOURLY)),
        ("billing::report", Cron::new("0 2 * * *")),
    ]);
    store.admin().deploy("billing@1", &v1, None).await.unwrap();

    let other = schema(&[
        (
            "billing::send",
            Cron::new(HOURLY).missed(MissedPolicy::Skip),
        ),
        ("billing::audit", Cron::new(MINUTELY)),
    ]);
    let error = store
        .admin()
        .deploy("billing@1", &other, None)
        .await
        .unwrap_err();
    assert!(error.is_invalid_input(), "{error}");
    assert_eq!(
        error.to_string(),
        "deployment `billing@1` is registered with other jobs: this schema adds 1 verb \
         (`billing::audit`), removes 1 (`billing::report`), changes 1 (`billing::send`: missed \
         `once` -> `skip`); a deployment key is one set of jobs: give this version its own key, \
         such as its version number or commit (docs/operations.md)"
    );
    let verbs: Vec<(String, String)> =
        sqlx::query_as("SELECT verb, missed FROM cron_jobs ORDER BY verb")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        verbs,
        [
            ("billing::report".to_owned(), "once".to_owned()),
            ("billing::send".to_owned(), "once".to_owned())
        ]
    );

    // The same jobs again, with docs now: the same schema.
    let documented = Schema::new([
        (
            "billing",
            Verb::new("billing::send", Cron::new(HOURLY)).doc("Sends them."),
        ),
        (
            "billing",
            Verb::new("billing::report", Cron::new("0 2 * * *")),
        ),
    ]);
    let again = store
        .admin()
        .deploy("billing@1", &documented, None)
        .await
        .unwrap();
    assert!(!again.created);
}

#[sqlx::test(migrations = "./migrations")]
async fn deploy_says_what_changes_relative_to_the_active_deployment(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    let v1 = schema(&[
        ("billing::send", Cron::new(HOURLY)),
        ("billing::report", Cron::new("0 2 * * *")),
        ("billing::old", Cron::new(MINUTELY)),
    ]);
    let first = store.admin().deploy("billing@1", &v1, None).await.unwrap();
    let changes = first.changes.unwrap();
    assert_eq!(changes.compared_with, None);
    assert_eq!(
        changes.added,
        ["billing::old", "billing::report", "billing::send"]
    );
    // A replica of it makes it active.
    let built = DeploymentSpec {
        schema: serde_json::to_string(&v1).unwrap(),
        ..deployment("billing@1", vec![])
    };
    replica(&pool, &built).await;

    let v2 = schema(&[
        ("billing::send", Cron::new(HOURLY)),
        ("billing::report", Cron::new("0 3 * * *")),
        ("billing::new", Cron::new(HOURLY)),
    ]);
    let deployed = store.admin().deploy("billing@2", &v2, None).await.unwrap();
    let changes = deployed.changes.unwrap();
    assert_eq!(changes.compared_with.as_deref(), Some("billing@1"));
    assert_eq!(changes.added, ["billing::new"]);
    let removed: Vec<(&str, &str)> = changes
        .removed
        .iter()
        .map(|r| (r.verb.as_str(), r.expression.as_str()))
        .collect();
    assert_eq!(removed, [("billing::old", MINUTELY)]);
    assert_eq!(changes.changed.len(), 1);
    assert_eq!(changes.changed[0].verb, "billing::report");
    assert_eq!(
        changes.changed[0].changes[0].to_string(),
        "expression `0 2 * * *` -> `0 3 * * *`"
    );
    assert_eq!(changes.unchanged, 1);
    let rows: Vec<(&str, Option<&str>, bool)> = deployed
        .jobs
        .iter()
        .map(|j| (j.verb.as_str(), j.change, j.added))
        .collect();
    assert_eq!(
        rows,
        [
            ("billing::new", Some("added"), true),
            ("billing::report", Some("changed"), true),
            ("billing::send", Some("unchanged"), true)
        ]
    );
}

// ---------------------------------------------------------------------------------------------------
// trigger

#[sqlx::test(migrations = "./migrations")]
async fn trigger_refuses_unknown_verbs_and_inactive_modules(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    let error = store
        .admin()
        .trigger("billing::send", None)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown verb `billing::send`; no verb is registered"
    );

    store
        .admin()
        .deploy(
            "billing@1",
            &schema(&[("billing::send_invoices", Cron::new(HOURLY))]),
            None,
        )
        .await
        .unwrap();
    let error = store
        .admin()
        .trigger("billing::send_invoice", None)
        .await
        .unwrap_err();
    assert!(error.is_invalid_input());
    assert_eq!(
        error.to_string(),
        "unknown verb `billing::send_invoice`; did you mean `billing::send_invoices`?"
    );
    let error = store
        .admin()
        .trigger("billing::send_invoices", None)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "module `billing` has no active deployment: no replica of it has run yet"
    );
    let error = store
        .admin()
        .trigger("billing::send_invoices", Some("shipping"))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown module `shipping`; expected one of: `billing`"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM cron_jobs WHERE trigger_requested_at IS NOT NULL"
        )
        .await,
        0
    );
}

// ---------------------------------------------------------------------------------------------------
// cancel

#[sqlx::test(migrations = "./migrations")]
async fn a_cancel_of_an_occurrence_waiting_for_its_retry_says_it_ended_it(pool: PgPool) {
    // Between attempts there is no handler to tell: the cancel ends the occurrence itself, and says
    // so (`ended`), with its actor and note (docs/operations.md, "Cancelling a run").
    let retried = support::retried(job("billing::export", HOURLY));
    let (store, runner) = replica(&pool, &deployment("billing@1", vec![retried])).await;
    sqlx::query("UPDATE cron_jobs SET next_execution = date_trunc('hour', now())")
        .execute(&pool)
        .await
        .unwrap();
    let claimed = claim(&store, &runner).await;
    let claim = &claimed.claims[0];
    let retry_now = Some(Duration::from_millis(1));
    let finished = finish_as(&store, &runner, &claimed, Outcome::Failed, retry_now).await;
    assert!(
        matches!(finished, Finished::Retrying { .. }),
        "{finished:?}"
    );

    let cancelled = store
        .admin()
        .with_actor(Actor::new("carol", Origin::Cli))
        .cancel("billing::export", None, Some("enough"))
        .await
        .unwrap();
    assert_eq!(
        (
            cancelled.run_id,
            cancelled.ended,
            cancelled.already_requested,
            cancelled.requested_by.as_str(),
            cancelled.note.as_deref(),
        ),
        (claim.run_id, true, false, "carol", Some("enough"))
    );
    let (outcome, error): (String, Option<String>) =
        sqlx::query_as("SELECT outcome, error FROM cron_job_runs WHERE id = $1")
            .bind(claim.run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (outcome.as_str(), error.as_deref()),
        ("cancelled", Some("cancelled by carol: enough"))
    );
}

// ---------------------------------------------------------------------------------------------------
// pause and resume

// ---------------------------------------------------------------------------------------------------
// status, runs, prune

#[sqlx::test(migrations = "./migrations")]
async fn status_shows_the_next_execution_in_the_jobs_zone_and_the_last_run(pool: PgPool) {
    let mut report = job("billing::report", "0 2 * * *");
    report.zone = Tz::America__New_York;
    report.schedule = ZonedSchedule::new(Schedule::parse("0 2 * * *").unwrap(), report.zone);
    let (store, runner) = replica(&pool, &deployment("billing@1", vec![report])).await;
    store
        .admin()
        .trigger("billing::report", None)
        .await
        .unwrap();
    let claimed = claim(&store, &runner).await;
    finish(&store, &runner, &claimed).await;

    let status = store.admin().status(None).await.unwrap();
    let job = &status.modules[0].jobs[0];
    assert_eq!(job.timezone, "America/New_York");
    assert_eq!(job.state, "idle");
    let next = job.next_execution.unwrap();
    let local = job.next_execution_local.as_deref().unwrap();
    assert!(local.contains("T02:00:00-0"), "{local}");
    assert_eq!(
        DateTime::parse_from_rfc3339(local)
            .unwrap()
            .with_timezone(&Utc),
        next
    );
    let last = job.last_run.as_ref().unwrap();
    assert_eq!(last.outcome, "succeeded");
    assert!(last.manual);

    let json = serde_json::to_value(&status).unwrap();
    let job = &json["modules"][0]["jobs"][0];
    assert_eq!(job["verb"], "billing::report");
    assert!(job["next_execution"].as_str().unwrap().ends_with('Z'));
    assert_eq!(json["modules"][0]["deployments"][0]["live_replicas"], 1);
}

#[sqlx::test(migrations = "./migrations")]
async fn runs_filters_by_verb_since_and_limit(pool: PgPool) {
    let (_store, _runner) = replica(
        &pool,
        &deployment(
            "billing@1",
            vec![job("billing::a", HOURLY), job("billing::b", HOURLY)],
        ),
    )
    .await;
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, \
             outcome, runner, runner_id) \
         SELECT 'billing', v, now() - make_interval(hours => h), now() - make_interval(hours => h), \
                now() - make_interval(hours => h), 'succeeded', 'test:1', 1 \
         FROM unnest(ARRAY['billing::a', 'billing::b']) v, generate_series(1, 10) h",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PgStore::from_pool(pool.clone());
    let all = store.admin().runs(&RunFilter::default()).await.unwrap();
    assert_eq!(all.len(), 20);
    assert!(
        all.windows(2)
            .all(|w| w[0].scheduled_at >= w[1].scheduled_at)
    );
    let a = store
        .admin()
        .runs(&RunFilter {
            verb: Some("a".to_owned()),
            since: Some(Since::Ago(Duration::from_secs(3 * 3600 + 60))),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(a.len(), 3);
    assert!(a.iter().all(|r| r.verb == "billing::a"));
    let limited = store
        .admin()
        .runs(&RunFilter {
            limit: 4,
            since: Some(Since::Instant(
                db_now(&pool).await - chrono::Duration::hours(100),
            )),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 4);
    let error = store
        .admin()
        .runs(&RunFilter {
            verb: Some("billing::c".to_owned()),
            ..RunFilter::default()
        })
        .await
        .unwrap_err();
    assert!(error.is_invalid_input(), "{error}");
}

#[sqlx::test(migrations = "./migrations")]
async fn prune_deletes_old_finished_runs_in_batches_and_never_a_running_one(pool: PgPool) {
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, \
             outcome, runner, runner_id) \
         SELECT 'billing', 'billing::a', now() - make_interval(days => d), \
                now() - make_interval(days => d), \
                CASE WHEN d = 40 THEN NULL \
                     ELSE now() - make_interval(days => d) + interval '1 hour' END, \
                CASE WHEN d = 40 THEN 'running' ELSE 'failed' END, 'test:1', 1 \
         FROM generate_series(1, 40) d",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PgStore::from_pool(pool.clone());
    // Days 31..=39 are older than 30 days and finished; day 40 is still running.
    assert_eq!(
        store
            .admin()
            .prune(Duration::from_secs(30 * 24 * 3600), 2)
            .await
            .unwrap(),
        9
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM cron_job_runs").await, 31);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM cron_job_runs WHERE outcome = 'running'"
        )
        .await,
        1
    );
    // Through the store trait, as the runtime's retention calls it.
    assert_eq!(
        store
            .prune_history(Duration::from_secs(10 * 24 * 3600))
            .await
            .unwrap(),
        20
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM cron_job_runs").await, 11);
}

#[sqlx::test(migrations = "./migrations")]
async fn prune_keeps_each_verbs_latest_success_however_old(pool: PgPool) {
    // A monthly verb whose last success is 40 days old, after an older success and a later failure,
    // beside a verb whose successes are all old.
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, \
             outcome, runner, runner_id) \
         SELECT 'billing', v, now() - make_interval(days => d), now() - make_interval(days => d), \
                now() - make_interval(days => d) + interval '1 hour', o, 'test:1', 1 \
         FROM (VALUES ('billing::monthly', 70, 'succeeded'), ('billing::monthly', 40, 'succeeded'), \
                      ('billing::monthly', 35, 'failed'), ('billing::other', 50, 'succeeded'), \
                      ('billing::other', 45, 'succeeded')) AS r(v, d, o)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = PgStore::from_pool(pool.clone());
    let deleted = store
        .admin()
        .prune(Duration::from_secs(30 * 24 * 3600), 100)
        .await
        .unwrap();
    assert_eq!(deleted, 3);
    let kept: Vec<(String, String)> =
        sqlx::query_as("SELECT verb, outcome FROM cron_job_runs ORDER BY verb, scheduled_at")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        kept,
        [
            ("billing::monthly".to_owned(), "succeeded".to_owned()),
            ("billing::other".to_owned(), "succeeded".to_owned()),
        ]
    );
}
