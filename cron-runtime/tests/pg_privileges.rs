//! Least privilege (docs/operations.md, "Setting up"): once migrated, the runtime needs only the privileges on its own tables. A role
//! that may read and write the four tables, and nothing else (no DDL), runs jobs end to end.

use std::time::Duration;

use cron_runtime::Runtime;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor, Row};

#[sqlx::test(migrations = "./migrations")]
async fn a_role_with_only_dml_on_the_four_tables_runs_jobs(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let admin = pool_options.connect_with(options.clone()).await.unwrap();
    let database = options
        .get_database()
        .expect("sqlx::test names a database")
        .to_owned();
    // Roles are cluster-wide: one of its own per test run.
    let role = format!("cronverb_app_{}", std::process::id());
    admin
        .execute(
            format!(
                "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
                 GRANT CONNECT ON DATABASE \"{database}\" TO {role};
                 GRANT USAGE ON SCHEMA public TO {role};
                 GRANT SELECT, INSERT, UPDATE, DELETE
                     ON cron_deployments, cron_jobs, cron_job_runs, cron_runners, cron_backfills TO {role};
                 GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};"
            )
            .as_str(),
        )
        .await
        .unwrap();

    let app = PgPoolOptions::new()
        .max_connections(5)
        .connect_with(options.clone().username(&role))
        .await
        .unwrap();
    // The role really is limited: it cannot change the schema.
    let ddl = sqlx::query("CREATE TABLE cron_extra (id int)")
        .execute(&app)
        .await;
    assert!(ddl.is_err(), "the application role could create a table");

    let runtime = Runtime::builder()
        .registered_jobs(false)
        .module("privileges")
        .deployment("privileges@1")
        .postgres(app.clone())
        .migrate(false)
        .job("privileges::tick", "* * * * * *", || async {})
        .build()
        .await
        .expect("builds without migrating");
    let handle = runtime.start();
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
