//! Least privilege (docs/operations.md, "Setting up"): once migrated, the runtime needs only the
//! privileges on its own tables that "Setting up" lists. A role granted exactly those, and nothing
//! else (no DDL), runs jobs end to end, and takes a module over with a deployment that drops an
//! override.

use std::time::Duration;

use cron_runtime::{PgStore, Runtime};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, Row};

/// The replicas' privileges as docs/operations.md, "Setting up", lists them.
const REPLICA_GRANTS: &str = "
    GRANT SELECT, INSERT, UPDATE, DELETE
        ON cron_deployments, cron_jobs, cron_job_runs, cron_runners, cron_backfills TO {role};
    GRANT DELETE ON cron_overrides TO {role};
    GRANT INSERT ON cron_audit TO {role};
    GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};";

/// A login role of its own (roles are cluster-wide: one per test run and `name`) granted
/// [`REPLICA_GRANTS`] on the test's database, and a pool of it; the database's own pool, which
/// migrated it.
async fn replica_role(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
    name: &str,
) -> (PgPool, String, PgPool) {
    let admin = pool_options.connect_with(options.clone()).await.unwrap();
    let database = options
        .get_database()
        .expect("sqlx::test names a database")
        .to_owned();
    let role = format!("cronverb_{name}_{}", std::process::id());
    let grants = REPLICA_GRANTS.replace("{role}", &role);
    admin
        .execute(
            format!(
                "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
                 GRANT CONNECT ON DATABASE \"{database}\" TO {role};
                 GRANT USAGE ON SCHEMA public TO {role};
                 {grants}"
            )
            .as_str(),
        )
        .await
        .unwrap();
    let app = PgPoolOptions::new()
        .max_connections(5)
        .connect_with(options.username(&role))
        .await
        .unwrap();
    (admin, role, app)
}

/// A runtime of module `privileges`, deployment `key`, on the role's pool, without migrating.
async fn runtime(app: &PgPool, key: &str, verbs: &[&str]) -> Runtime {
    let mut builder = Runtime::builder()
        .registered_jobs(false)
        .module("privileges")
        .deployment(key)
        .postgres(app.clone())
        .migrate(false);
    for verb in verbs {
        builder = builder.job(*verb, "* * * * * *", || async {});
    }
    builder.build().await.expect("builds without migrating")
}

#[sqlx::test(migrations = "./migrations")]
async fn a_role_with_only_dml_on_the_four_tables_runs_jobs(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (admin, role, app) = replica_role(pool_options, options, "app").await;
    // The role really is limited: it cannot change the schema.
    let ddl = sqlx::query("CREATE TABLE cron_extra (id int)")
        .execute(&app)
        .await;
    assert!(ddl.is_err(), "the application role could create a table");

    let handle = runtime(&app, "privileges@1", &["privileges::tick"])
        .await
        .start();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    handle.shutdown().await.expect("runs and shuts down");
    app.close().await;

    let rows = sqlx::query(
        "SELECT count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded, count(*) AS runs \
         FROM cron_job_runs WHERE verb = 'privileges::tick'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    let succeeded: i64 = rows.get("succeeded");
    assert!(succeeded >= 2, "{succeeded} runs succeeded in 3.5 s");

    admin
        .execute(format!("DROP OWNED BY {role}; DROP ROLE {role};").as_str())
        .await
        .unwrap();
}

/// docs/operations.md, "An override lives as long as its verb": the takeover of a deployment whose code
/// has no overridden verb drops the override and writes its `override_dropped` row, with the
/// replicas' role. (Granted only DML on the five tables, as "Setting up" said before, the takeover
/// failed on `cron_overrides` at every heartbeat and the deployment never took over.)
#[sqlx::test(migrations = "./migrations")]
async fn a_deployment_that_drops_an_override_takes_over_with_the_replicas_role(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (admin, role, app) = replica_role(pool_options, options, "drop").await;
    let first = runtime(
        &app,
        "privileges@1",
        &["privileges::tick", "privileges::keep"],
    )
    .await;
    first.start().shutdown().await.expect("runs and shuts down");
    PgStore::from_pool(admin.clone())
        .admin()
        .reschedule("tick", Some("privileges"), "*/2 * * * * *", None, None)
        .await
        .expect("an operator overrides the verb");

    let handle = runtime(&app, "privileges@2", &["privileges::keep"])
        .await
        .start();
    let mut active = false;
    for _ in 0..50 {
        // No row until the replica has registered the deployment.
        active =
            sqlx::query_scalar("SELECT active FROM cron_deployments WHERE key = 'privileges@2'")
                .fetch_optional(&admin)
                .await
                .unwrap()
                .unwrap_or(false);
        if active {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    handle.shutdown().await.expect("runs and shuts down");
    app.close().await;

    assert!(
        active,
        "the deployment without the verb did not take over in 10 s"
    );
    let overrides: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_overrides")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(overrides, 0, "the override outlived its verb");
    let dropped: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron_audit WHERE action = 'override_dropped' AND actor = 'privileges@2'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(dropped, 1, "the takeover's audit row");

    admin
        .execute(format!("DROP OWNED BY {role}; DROP ROLE {role};").as_str())
        .await
        .unwrap();
}
