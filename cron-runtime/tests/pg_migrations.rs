//! Migrations across releases (docs/operations.md, "Migrations across releases"): a replica of this build
//! starts against a database that a newer release migrated additively, refuses one that a newer release
//! contracted (naming both versions) or whose applied migrations differ from this build's, and logs no
//! server notice when it finds the tables already migrated. One fresh database per test, migrated by the
//! code under test (`migrations = false`).

use std::time::Duration;

use cron_runtime::Runtime;
use cron_runtime::store::postgres::{MIGRATOR, PgStore};
use sqlx::PgPool;
use support::Logs;

mod support;

/// The newest migration this build embeds, as messages write it.
fn newest_known() -> String {
    let newest = MIGRATOR.iter().map(|m| m.version).max().unwrap();
    format!("{newest:04}")
}

/// What a newer release leaves behind after applying one migration this build does not know, in the
/// row sqlx writes for it (`apply` in sqlx-postgres).
async fn apply_newer_migration(pool: &PgPool, version: i64, sql: &str) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql(sql).execute(&mut *tx).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'a newer release', true, sha384($2::bytea), 1000)",
    )
    .bind(version)
    .bind(sql.as_bytes())
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

fn builder(pool: &PgPool, key: &str) -> cron_runtime::RuntimeBuilder {
    Runtime::builder()
        .registered_jobs(false)
        .module("rollback")
        .deployment(key)
        .postgres(pool.clone())
        .job("rollback::tick", "* * * * * *", || async {})
}

#[sqlx::test(migrations = false)]
async fn a_replica_starts_and_runs_on_a_database_a_newer_release_expanded(pool: PgPool) {
    PgStore::from_pool(pool.clone()).migrate().await.unwrap();
    // An additive migration, as a newer release ships it ahead of using it: a nullable column.
    apply_newer_migration(&pool, 9999, "ALTER TABLE cron_jobs ADD COLUMN owner TEXT").await;

    for migrate in [true, false] {
        let runtime = builder(&pool, &format!("rollback@{migrate}"))
            .migrate(migrate)
            .build()
            .await
            .unwrap_or_else(|e| panic!("builds with migrate({migrate}): {e}"));
        let handle = runtime.start();
        // Each start runs its job, under its own deployment: the one that did not migrate too.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let succeeded: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM cron_job_runs r JOIN cron_deployments d ON d.id = r.deployment_id \
                 WHERE d.key = $1 AND r.outcome = 'succeeded'",
            )
            .bind(format!("rollback@{migrate}"))
            .fetch_one(&pool)
            .await
            .unwrap();
            if succeeded > 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no run succeeded in 10 s with migrate({migrate})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        handle.shutdown().await.unwrap();
    }
    // The newer release's migration is still recorded: the older build did not touch it.
    let newer: i64 =
        sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE version = 9999")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(newer, 1);
}

#[sqlx::test(migrations = false)]
async fn a_database_a_newer_release_contracted_is_refused_naming_both_versions(pool: PgPool) {
    PgStore::from_pool(pool.clone()).migrate().await.unwrap();
    // A contract migration: it drops what this build reads and says so in the marker.
    apply_newer_migration(
        &pool,
        9999,
        "ALTER TABLE cron_jobs DROP COLUMN paused_at; \
         UPDATE cron_compatibility SET required_migration = 9999",
    )
    .await;

    for migrate in [true, false] {
        let error = builder(&pool, "rollback@1")
            .migrate(migrate)
            .build()
            .await
            .expect_err("a contracted database is refused");
        let message = error.to_string();
        assert!(
            message.contains("migration 9999") && message.contains(&newest_known()),
            "migrate({migrate}): {message}"
        );
    }
    let deployments: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_deployments")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(deployments, 0, "a refused replica registered nothing");
}

#[sqlx::test(migrations = false)]
async fn a_known_migration_applied_with_other_contents_is_refused(pool: PgPool) {
    PgStore::from_pool(pool.clone()).migrate().await.unwrap();
    apply_newer_migration(&pool, 9999, "ALTER TABLE cron_jobs ADD COLUMN owner TEXT").await;
    sqlx::query("UPDATE _sqlx_migrations SET checksum = '\\x00' WHERE version = 1")
        .execute(&pool)
        .await
        .unwrap();

    let error = PgStore::from_pool(pool.clone())
        .migrate()
        .await
        .expect_err("a changed migration is refused");
    let message = error.to_string();
    assert!(
        message.contains("migration 1 was previously applied but has been modified"),
        "{message}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_replica_starting_on_migrated_tables_logs_no_server_notice(pool: PgPool) {
    PgStore::from_pool(pool.clone()).migrate().await.unwrap();

    // `sqlx::test` polls everything on this thread: the subscriber sees the pool's connections.
    let captured = Logs::capture(tracing::Level::TRACE);

    // The subscriber does see the server's notices.
    sqlx::raw_sql("DO $$ BEGIN RAISE NOTICE 'probe notice'; END $$")
        .execute(&pool)
        .await
        .unwrap();
    assert!(
        captured.text().contains("probe notice"),
        "{}",
        captured.text()
    );

    // A second replica, and the next release's `cronverb migrate`, find the tables migrated.
    let runtime = builder(&pool, "rollback@1").build().await.unwrap();
    drop(runtime);
    PgStore::from_pool(pool.clone()).migrate().await.unwrap();
    let text = captured.text();
    let notices: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("sqlx::postgres::notice") && !line.contains("probe notice"))
        .collect();
    assert!(notices.is_empty(), "{notices:#?}");
}
