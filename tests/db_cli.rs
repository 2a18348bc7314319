//! The database commands of `cronverb` (`migrate`, `deploy`, `status`, `runs`, `pause`, `resume`,
//! `trigger`, `prune`) run as an operator runs them, against a real PostgreSQL server: each test creates
//! its own database on the server of `DATABASE_URL` and drops it at the end.
#![cfg(feature = "cli")]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cron_runtime::store::postgres::PgStore;
use cron_runtime::store::{
    DeploymentSpec, Finish, Finished, JobSpec, Outcome, Retries, Runner, Store,
};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use serde_json::Value;

#[path = "support/drift.rs"]
mod drift;
use sqlx::{Connection, PgConnection};

const SCHEMA: &str = r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::send_invoices",
          "cron": { "expression": "0 2 * * *", "timezone": "Europe/Berlin", "timeout": "10m" } },
        { "name": "billing::heartbeat", "cron": { "expression": "*/5 * * * *" } }
      ]
    }
  ]
}"#;

/// A database of its own on the server of `DATABASE_URL`, dropped when the test ends.
struct Database {
    name: String,
    url: String,
    server: String,
}

impl Database {
    fn new(test: &str) -> Database {
        let server = std::env::var("DATABASE_URL")
            .expect("DATABASE_URL names a PostgreSQL server the tests may create databases on");
        let name = format!("cronverb_cli_{test}_{}", std::process::id());
        let database = Database {
            url: with_database(&server, &name),
            name,
            server,
        };
        database.admin(&format!("DROP DATABASE IF EXISTS {}", database.name));
        database.admin(&format!("CREATE DATABASE {}", database.name));
        database
    }

    /// A migrated database.
    fn migrated(test: &str) -> Database {
        let database = Database::new(test);
        let output = database.cronverb(&["migrate"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        database
    }

    fn admin(&self, sql: &str) {
        block_on(async {
            let mut connection = PgConnection::connect(&self.server).await.unwrap();
            sqlx::raw_sql(sql).execute(&mut connection).await.unwrap();
        });
    }

    /// Runs `sql` in this database.
    fn admin_in(&self, sql: &str) {
        block_on(async {
            let mut connection = PgConnection::connect(&self.url).await.unwrap();
            sqlx::raw_sql(sql).execute(&mut connection).await.unwrap();
        });
    }

    fn scalar(&self, sql: &str) -> i64 {
        block_on(async {
            let mut connection = PgConnection::connect(&self.url).await.unwrap();
            sqlx::query_scalar(sql)
                .fetch_one(&mut connection)
                .await
                .unwrap()
        })
    }

    /// Runs `cronverb` with `DATABASE_URL` set to this database.
    fn cronverb(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_cronverb"))
            .args(args)
            .env("DATABASE_URL", &self.url)
            .output()
            .expect("the cronverb binary runs")
    }

    /// Runs `cronverb … --json`, asserting that it succeeded, and returns its JSON.
    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let output = self.cronverb(&args);
        assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
        serde_json::from_str(stdout(&output)).expect("--json prints JSON")
    }

    fn schema_file(&self, text: &str) -> SchemaFile {
        let path = std::env::temp_dir().join(format!("{}-{}.json", self.name, text.len()));
        std::fs::write(&path, text).unwrap();
        SchemaFile(path)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        self.admin(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// A schema file, removed when dropped.
struct SchemaFile(std::path::PathBuf);

impl SchemaFile {
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for SchemaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn with_database(url: &str, name: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let path = url[authority..]
        .find('/')
        .map_or(url.len(), |i| authority + i);
    let query = url[path..].find('?').map_or("", |i| &url[path + i..]);
    format!("{}/{name}{query}", &url[..path])
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    current_thread().block_on(future)
}

/// A runtime for the test's own store: a store's pool lives on the runtime that made it.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("standard output is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("standard error is UTF-8")
}

fn heartbeat_job() -> JobSpec {
    JobSpec {
        verb: "billing::heartbeat".to_owned(),
        expression: "*/5 * * * *".to_owned(),
        zone: chrono_tz::Tz::UTC,
        schedule: ZonedSchedule::utc(Schedule::parse("*/5 * * * *").unwrap()),
        timeout: Duration::from_secs(60),
        missed: MissedPolicy::Once,
        retry: Default::default(),
        lease: None,
        on: Default::default(),
        catch_up: None,
        jitter: None,
        expect_within: None,
        fixed: false,
    }
}

/// A replica of `billing@1` (the build of `SCHEMA`) running the heartbeat job, registered in this
/// process.
async fn replica(url: &str) -> (PgStore, Runner) {
    replica_running(url, heartbeat_job()).await
}

/// A replica of `billing@1` running `heartbeat`, the heartbeat job as its build declares it.
async fn replica_running(url: &str, heartbeat: JobSpec) -> (PgStore, Runner) {
    let store = PgStore::connect(url).await.unwrap();
    let runner = store
        .register(&DeploymentSpec {
            key: "billing@1".to_owned(),
            module: "billing".to_owned(),
            // The build that `SCHEMA` was extracted from.
            schema: SCHEMA.to_owned(),
            jobs: vec![heartbeat],
        })
        .await
        .unwrap();
    (store, runner)
}

#[test]
fn migrate_creates_the_tables_that_the_other_commands_need() {
    let db = Database::new("migrate");
    let output = db.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("run `cronverb migrate`"),
        "{}",
        stderr(&output)
    );

    let output = db.cronverb(&["migrate"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "cronverb's tables are up to date (migration 0014)\n"
    );
    // Again: nothing to do.
    let migrated = db.json(&["migrate"]);
    assert_eq!(migrated["version"], 14);

    let output = db.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "no deployment is registered\n");
    assert_eq!(db.json(&["status"])["modules"], serde_json::json!([]));
}

#[test]
fn deploy_registers_ahead_and_status_pause_resume_show_it() {
    let db = Database::migrated("deploy");
    let file = db.schema_file(SCHEMA);

    let output = db.cronverb(&["deploy", "--deployment", "billing@1", file.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with(
            "registered deployment `billing@1` of module `billing` (inactive until its first replica runs)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("billing::send_invoices  0 2 * * *    Europe/Berlin"),
        "{text}"
    );

    let deployed = db.json(&["deploy", "--deployment", "billing@1", file.path()]);
    assert_eq!(deployed["created"], false);
    assert_eq!(deployed["active"], false);
    assert_eq!(deployed["jobs"][1]["verb"], "billing::send_invoices");
    assert_eq!(deployed["jobs"][1]["added"], false);
    assert_eq!(db.scalar("SELECT count(*) FROM cron_runners"), 0);

    let status = db.json(&["status"]);
    let billing = &status["modules"][0];
    assert_eq!(billing["name"], "billing");
    assert_eq!(billing["active_deployment"], Value::Null);
    assert_eq!(billing["deployments"][0]["key"], "billing@1");
    assert_eq!(billing["deployments"][0]["live_replicas"], 0);
    let invoices = &billing["jobs"][1];
    assert_eq!(invoices["timezone"], "Europe/Berlin");
    let local = invoices["next_execution_local"].as_str().unwrap();
    assert!(local.contains("T02:00:00+0"), "{local}");

    let paused = db.json(&["pause", "send_invoices", "--note", "INC-7 relay down"]);
    assert_eq!(paused["verb"], "billing::send_invoices");
    assert_eq!(paused["paused"], true);
    let output = db.cronverb(&["status"]);
    assert!(
        stdout(&output).contains("`billing::send_invoices` is paused: INC-7 relay down"),
        "{}",
        stdout(&output)
    );
    let output = db.cronverb(&["resume", "billing::send_invoices"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("resumed `billing::send_invoices`\n"));
    assert_eq!(db.scalar("SELECT count(*) FROM cron_jobs WHERE paused"), 0);

    assert_eq!(db.json(&["runs"]), serde_json::json!([]));
    let pruned = db.json(&["prune", "--older-than", "1d"]);
    assert_eq!(pruned["deleted"], 0);
    assert_eq!(pruned["older_than_secs"], 86400);
}

/// `cronverb cancel billing::heartbeat --actor carol --note NOTE --json`.
fn cancel_as_carol(db: &Database, note: &str) -> Value {
    db.json(&[
        "cancel",
        "billing::heartbeat",
        "--actor",
        "carol",
        "--note",
        note,
    ])
}

/// What `cronverb cancel --json` says of its request: the run, who asked, the note, whether it had been
/// asked already and whether the cancel ended the run itself.
fn requested(cancelled: &Value) -> (i64, &str, &str, bool, bool) {
    (
        cancelled["run_id"].as_i64().unwrap(),
        cancelled["requested_by"].as_str().unwrap(),
        cancelled["note"].as_str().unwrap(),
        cancelled["already_requested"].as_bool().unwrap(),
        cancelled["ended"].as_bool().unwrap(),
    )
}

#[test]
fn cancel_asks_the_run_in_flight_to_stop_once_and_is_refused_without_one() {
    let db = Database::migrated("cancel");
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&db.url));
    // Nothing in flight: a cancel is refused, and audits nothing.
    let output = db.cronverb(&["cancel", "billing::heartbeat", "--note", "stuck"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "error: `billing::heartbeat` has no run in flight: there is nothing to cancel\n"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM cron_audit WHERE action = 'cancel'"),
        0
    );
    db.json(&["trigger", "billing::heartbeat"]);
    let claimed = runtime.block_on(async {
        let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
        assert_eq!(claimed.claims.len(), 1);
        claimed
    });
    // The manual run is in flight: a cancel asks it to stop, once; the replica reads the request.
    let cancelled = cancel_as_carol(&db, "stuck");
    assert_eq!(
        requested(&cancelled),
        (claimed.claims[0].run_id, "carol", "stuck", false, false),
        "a run in flight is asked, not ended"
    );
    let again = db.json(&["cancel", "billing::heartbeat", "--actor", "dave"]);
    assert_eq!(
        (&again["requested_by"], &again["already_requested"]),
        (&serde_json::json!("carol"), &serde_json::json!(true))
    );
    let requests = runtime
        .block_on(store.cancels(&[claimed.claims[0].run_id]))
        .unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].error(), "cancelled by carol: stuck");
    assert_eq!(
        db.scalar("SELECT count(*) FROM cron_audit WHERE action = 'cancel'"),
        2
    );
}

#[test]
fn cancel_of_an_occurrence_waiting_for_its_retry_says_it_ended_it() {
    let db = Database::migrated("cancel_retry");
    let runtime = current_thread();
    let retried = JobSpec {
        retry: Retries {
            retries: 3,
            backoff: Duration::from_secs(60),
        },
        ..heartbeat_job()
    };
    let (store, runner) = runtime.block_on(replica_running(&db.url, retried));
    // Due at the latest occurrence of its schedule (every five minutes), whose next one is ahead.
    db.admin_in(
        "UPDATE cron_jobs \
         SET next_execution = to_timestamp(floor(extract(epoch FROM now()) / 300) * 300)",
    );
    let run_id = runtime.block_on(async {
        let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
        let claim = &claimed.claims[0];
        let failed = Finish {
            run_id: claim.run_id,
            job_id: claim.job_id,
            outcome: Outcome::Failed,
            error: Some("relay refused".to_owned()),
            ended_at: None,
            started_at: None,
            retry_after: Some(Duration::from_millis(1)),
        };
        let finished = store.finish(&runner, &[failed], None).await.single();
        assert!(
            matches!(finished, Ok(Finished::Retrying { .. })),
            "{finished:?}"
        );
        claim.run_id
    });
    let cancelled = cancel_as_carol(&db, "enough");
    assert_eq!(
        requested(&cancelled),
        (run_id, "carol", "enough", false, true),
        "an occurrence waiting for its retry is ended, not asked"
    );
    assert_eq!(
        db.scalar(&format!(
            "SELECT count(*) FROM cron_job_runs \
             WHERE id = {run_id} AND outcome = 'cancelled' AND error = 'cancelled by carol: enough'"
        )),
        1
    );
    // Nothing waits any more.
    let output = db.cronverb(&["cancel", "billing::heartbeat"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
}

#[test]
fn trigger_records_a_manual_run_through_the_replicas_claim() {
    let db = Database::migrated("trigger");
    // The store's pool lives on this runtime: one runtime for the whole test.
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&db.url));

    let triggered = db.json(&["trigger", "billing::heartbeat"]);
    assert_eq!(triggered["deployment"], "billing@1");
    assert_eq!(triggered["already_pending"], false);
    let claimed = runtime.block_on(async {
        let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
        assert_eq!(claimed.claims.len(), 1);
        claimed
    });
    // Executing: a second trigger is refused, and nothing changes.
    let output = db.cronverb(&["trigger", "billing::heartbeat"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("is executing") && stderr(&output).contains("never overlaps"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM cron_jobs WHERE trigger_requested_at IS NOT NULL"),
        0
    );
    runtime.block_on(async {
        let claim = &claimed.claims[0];
        store
            .finish(
                &runner,
                &[Finish {
                    run_id: claim.run_id,
                    job_id: claim.job_id,
                    outcome: Outcome::Failed,
                    error: Some("the relay said no".to_owned()),
                    ended_at: None,
                    // Its handler started 300 ms after the trigger's instant.
                    started_at: Some(claim.scheduled_at + chrono::Duration::milliseconds(300)),
                    retry_after: None,
                }],
                None,
            )
            .await
            .single()
            .unwrap();
    });

    let runs = db.json(&["runs", "--verb", "heartbeat", "--since", "1h"]);
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["manual"], true);
    assert_eq!(runs[0]["outcome"], "failed");
    assert_eq!(runs[0]["lateness_ms"], 300);
    assert!(runs[0]["claimed_at"].is_string(), "{runs}");
    assert_eq!(runs[0]["scheduled_at"], triggered["requested_at"]);
    let output = db.cronverb(&["runs"]);
    assert!(
        stdout(&output).contains("LATENESS") && stdout(&output).contains(" 0.300s "),
        "{}",
        stdout(&output)
    );
    assert!(
        stdout(&output).contains("manual; the relay said no"),
        "{}",
        stdout(&output)
    );
    let status = db.json(&["status"]);
    assert_eq!(status["modules"][0]["deployments"][0]["live_replicas"], 1);
    assert_eq!(
        status["modules"][0]["jobs"][0]["last_run"]["outcome"],
        "failed"
    );
    drop(store);
}

#[test]
fn a_schema_file_that_is_not_a_valid_schema_changes_nothing() {
    let db = Database::migrated("bad_schema");
    let not_json = db.schema_file("module billing {\n");
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", not_json.path()]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with(&format!(
            "error: `{}` is not a valid cronverb schema: invalid JSON",
            not_json.path()
        )),
        "{}",
        stderr(&output)
    );

    let invalid = db.schema_file(&SCHEMA.replace("*/5 * * * *", "*/0 * * * *"));
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", invalid.path()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("invalid schema: verb `billing::heartbeat`: expression `*/0 * * * *`"),
        "{}",
        stderr(&output)
    );

    let output = db.cronverb(&["deploy", "--deployment", "billing@1", "/no/such/file.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("error: cannot read `/no/such/file.json`"));

    assert_eq!(db.scalar("SELECT count(*) FROM cron_deployments"), 0);
    assert_eq!(db.scalar("SELECT count(*) FROM cron_jobs"), 0);
}

#[test]
fn an_unknown_verb_is_named_with_the_close_ones_and_changes_nothing() {
    let db = Database::migrated("unknown_verb");
    let file = db.schema_file(SCHEMA);
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", file.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    for command in ["pause", "resume", "trigger", "cancel"] {
        let output = db.cronverb(&[command, "billing::send_invoice"]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert_eq!(
            stderr(&output),
            "error: unknown verb `billing::send_invoice`; did you mean `billing::send_invoices`?\n",
            "{command}"
        );
    }
    let output = db.cronverb(&["runs", "--verb", "cleanup"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: unknown verb `cleanup`; expected one of: `billing::heartbeat`, `billing::send_invoices`\n"
    );
    let output = db.cronverb(&["status", "--module", "shipping"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM cron_jobs WHERE paused OR trigger_requested_at IS NOT NULL"
        ),
        0
    );

    let output = db.cronverb(&["runs", "--since", "yesterday"]);
    assert_eq!(output.status.code(), Some(2));
    let output = db.cronverb(&["prune", "--older-than", "0d"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_database_that_does_not_answer_fails_quickly_without_showing_the_password() {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args([
            "status",
            "--database-url",
            "postgres://app:s3cret@127.0.0.1:1/prod",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(15));
    let message = stderr(&output);
    assert!(
        message.starts_with("error: while connecting to postgres://app:***@127.0.0.1:1/prod"),
        "{message}"
    );
    assert!(!message.contains("s3cret"));

    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .arg("status")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: no database given: pass `--database-url` or set `DATABASE_URL`\n"
    );
}

/// What a newer release leaves behind after applying a migration this build does not know: its DDL and
/// the row sqlx records for it.
fn apply_newer_migration(db: &Database, version: i64, sql: &str) {
    block_on(async {
        let mut connection = PgConnection::connect(&db.url).await.unwrap();
        let mut tx = connection.begin().await.unwrap();
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
    });
}

#[test]
fn migrate_of_an_older_release_accepts_additive_newer_migrations_and_refuses_a_contract() {
    let db = Database::migrated("newer");
    apply_newer_migration(&db, 9999, "ALTER TABLE cron_jobs ADD COLUMN owner TEXT");
    let output = db.cronverb(&["migrate"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = db.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    apply_newer_migration(
        &db,
        10000,
        "ALTER TABLE cron_jobs DROP COLUMN paused_at; \
         UPDATE cron_compatibility SET required_migration = 10000",
    );
    let output = db.cronverb(&["migrate"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(
        message.contains("migration 10000") && message.contains("up to 0014"),
        "{message}"
    );
    // Every other command refuses it as `migrate` and the replicas do, before reading or writing.
    for args in [
        &["status"][..],
        &["runs"],
        &["pause", "heartbeat"],
        &["resume", "heartbeat"],
        &["trigger", "heartbeat"],
        &["prune"],
    ] {
        let output = db.cronverb(args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stdout(&output)
        );
        let message = stderr(&output);
        assert!(
            message.contains("require migration 10000 or later") && message.contains("up to 0014"),
            "{args:?}: {message}"
        );
    }
}

/// The URL of a database that does not exist on the test server (the server answers at once, so the
/// command fails fast), with `query` appended.
fn missing_database(query: &str) -> String {
    let server = std::env::var("DATABASE_URL").expect("DATABASE_URL is set");
    let url = with_database(&server, "cronverb_no_such_database");
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{query}")
}

#[test]
fn no_form_of_connection_string_shows_its_password() {
    // Every form libpq accepts a password in; sqlx takes only URLs, so the key/value strings are refused
    // as what was typed wrong.
    let forms = [
        (missing_database("password=S3cretPW"), 1),
        (missing_database("sslmode=disable&password=S3cretPW"), 1),
        (missing_database("pass%77ord=S3cretPW"), 1),
        (missing_database("sslpassword=S3cretPW"), 1),
        (missing_database("password=S3cretPW&sslmode=bogus"), 2),
        (
            "postgres://postgres:S3cretPW@127.0.0.1:5432/cronverb_no_such_database".to_owned(),
            1,
        ),
        (
            "host=127.0.0.1 port=5432 user=postgres password=S3cretPW dbname=x".to_owned(),
            2,
        ),
        ("host=127.0.0.1 password = 'S3cret\\' PW'".to_owned(), 2),
        ("sslpassword=S3cretPW host=127.0.0.1".to_owned(), 2),
    ];
    for (url, code) in &forms {
        for command in ["status", "migrate", "runs", "prune", "trigger", "dashboard"] {
            let mut args = vec![command, "--database-url", url.as_str()];
            if command == "trigger" {
                args.insert(1, "billing::heartbeat");
            }
            if command == "dashboard" {
                args.extend(["--listen", "127.0.0.1:0"]);
            }
            let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
                .args(&args)
                .output()
                .unwrap();
            let (out, err) = (stdout(&output), stderr(&output));
            assert!(
                !out.contains("S3cret") && !err.contains("S3cret"),
                "`cronverb {command}` with `{url}` printed the password:\n{out}{err}"
            );
            assert_eq!(output.status.code(), Some(*code), "{command} {url}: {err}");
            assert!(err.starts_with("error: "), "{err}");
            assert!(err.contains("***"), "{err}");
        }
    }
    // The same through `DATABASE_URL`.
    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .arg("status")
        .env("DATABASE_URL", missing_database("password=S3cretPW"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(!stderr(&output).contains("S3cret"), "{}", stderr(&output));
}

#[test]
fn runs_show_each_attempt_of_a_retried_occurrence_and_a_pending_retry() {
    let db = Database::migrated("attempts");
    let runtime = current_thread();
    let (_store, _runner) = runtime.block_on(replica(&db.url));
    // An occurrence whose retries the next occurrence cut short, and one whose retry is pending: the
    // job row is held idle at the retry's instant for it.
    db.admin_in(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome, \
         error, runner, runner_id, attempts) SELECT module_name, verb, '2026-03-08T10:00:00Z', \
         '2026-03-08T10:00:00Z', '2026-03-08T10:00:35Z', 'failed', \
         'retries cut short by the next occurrence', 'h:1', 1, \
         '[{\"outcome\":\"failed\",\"error\":\"boom\",\"started_at\":\"2026-03-08T10:00:00Z\",\
         \"finished_at\":\"2026-03-08T10:00:01.500Z\"},{\"outcome\":\"timed_out\",\"error\":\"ran past \
         its timeout of 30s\",\"started_at\":\"2026-03-08T10:00:05Z\",\"finished_at\":\
         \"2026-03-08T10:00:35Z\"}]' FROM cron_jobs; \
         INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, outcome, runner, \
         runner_id, attempts) SELECT module_name, verb, '2026-03-08T11:00:00Z', '2026-03-08T11:00:00Z', \
         'running', 'h:1', 1, '[{\"outcome\":\"failed\",\"error\":\"the relay said no\",\
         \"started_at\":\"2026-03-08T11:00:00Z\",\"finished_at\":\"2026-03-08T11:00:02Z\"}]' \
         FROM cron_jobs; \
         UPDATE cron_jobs SET next_execution = '2026-03-08T11:00:12Z', retry_run_id = \
         (SELECT id FROM cron_job_runs WHERE scheduled_at = '2026-03-08T11:00:00Z')",
    );

    let runs = db.json(&["runs"]);
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(runs[0]["outcome"], "retrying");
    assert_eq!(runs[0]["retry_at"], "2026-03-08T11:00:12Z");
    assert_eq!(runs[0]["finished_at"], Value::Null);
    assert_eq!(runs[0]["attempts"][0]["error"], "the relay said no");
    assert_eq!(runs[1]["outcome"], "failed");
    assert_eq!(runs[1]["retry_at"], Value::Null);
    assert_eq!(runs[1]["error"], "retries cut short by the next occurrence");
    assert_eq!(runs[1]["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(runs[1]["attempts"][1]["outcome"], "timed_out");
    assert_eq!(
        runs[1]["attempts"][0]["finished_at"],
        "2026-03-08T10:00:01.500Z"
    );

    let output = db.cronverb(&["runs"]);
    let text = stdout(&output);
    assert!(text.contains(" ATTEMPTS "), "{text}");
    assert!(
        text.contains("retrying  1+ ") && text.contains("retry at 2026-03-08T11:00:12Z"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n  attempt 1  failed     2026-03-08T11:00:00Z  2.000s  the relay said no\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("failed    2  ") && text.contains("retries cut short by the next occurrence"),
        "{text}"
    );
    assert!(
        text.contains("\n  attempt 1  failed     2026-03-08T10:00:00Z  1.500s  boom\n")
            && text.contains(
                "\n  attempt 2  timed_out  2026-03-08T10:00:05Z  30.000s  ran past its timeout of 30s\n"
            ),
        "{text}"
    );
    // Paging by verb still reads the same runs.
    let runs = db.json(&["runs", "--verb", "heartbeat", "--limit", "1"]);
    assert_eq!(runs[0]["outcome"], "retrying");
}

const ESC: &str = "\u{1b}";

#[test]
fn control_characters_in_names_notes_and_errors_are_shown_escaped() {
    let db = Database::migrated("control");
    let runtime = current_thread();
    let (store, _runner) = runtime.block_on(replica(&db.url));
    let output = db.cronverb(&["pause", "heartbeat", "--note", "\u{1b}[2Jall clear\r"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let paused = stdout(&output).to_owned();
    // A verb and an error text as a careless or hostile writer could leave them in the rows.
    db.admin_in(
        "UPDATE cron_jobs SET verb = E'billing::heart\\x1b]0;owned\\x07beat\\r'; \
         INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome, \
         error, runner, runner_id) SELECT module_name, verb, now() - interval '1 minute', \
         now() - interval '1 minute', now(), 'failed', E'boom\\x1b[31m red\\x08', 'h:1', 1 \
         FROM cron_jobs",
    );
    let status = db.cronverb(&["status"]);
    let runs = db.cronverb(&["runs"]);
    // An unknown verb's suggestions come from the rows too.
    let unknown = db.cronverb(&["trigger", "billing::heartbeet"]);
    for (what, text) in [
        ("pause", paused.as_str()),
        ("status", stdout(&status)),
        ("runs", stdout(&runs)),
        ("trigger's error", stderr(&unknown)),
    ] {
        assert!(
            !text.contains(|c: char| c.is_control() && c != '\n'),
            "{what} prints control characters raw: {text:?}"
        );
        assert!(text.contains("\\u{1b}"), "{what}: {text}");
    }
    assert!(
        stdout(&status).contains("billing::heart\\u{1b}]0;owned\\u{7}beat\\r"),
        "{}",
        stdout(&status)
    );
    assert!(
        stdout(&status).contains("is paused: \\u{1b}[2Jall clear\\r"),
        "{}",
        stdout(&status)
    );
    assert!(
        stdout(&runs).contains("boom\\u{1b}[31m red\\u{8}"),
        "{}",
        stdout(&runs)
    );
    // JSON keeps the text as it is (serde escapes it).
    let json = db.json(&["status"]);
    assert_eq!(
        json["modules"][0]["jobs"][0]["pause_note"],
        format!("{ESC}[2Jall clear\r")
    );
    drop(store);
}

#[test]
fn status_flags_a_row_that_cannot_be_scheduled() {
    let db = Database::migrated("broken");
    let file = db.schema_file(SCHEMA);
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", file.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    db.admin_in("UPDATE cron_jobs SET schedule = '61 * * * *' WHERE verb = 'billing::heartbeat'");
    db.admin_in(
        "UPDATE cron_jobs SET timezone = 'Mars/Olympus' WHERE verb = 'billing::send_invoices'",
    );

    let json = db.json(&["status"]);
    let jobs = &json["modules"][0]["jobs"];
    assert_eq!(jobs[0]["verb"], "billing::heartbeat");
    let reason = jobs[0]["broken"].as_str().unwrap_or_default();
    assert!(reason.contains("`61 * * * *`"), "{json}");
    let reason = jobs[1]["broken"].as_str().unwrap_or_default();
    assert!(reason.contains("Mars/Olympus"), "{json}");

    let output = db.cronverb(&["status"]);
    let text = stdout(&output);
    assert!(text.contains("idle, broken"), "{text}");
    assert!(
        text.contains("`billing::heartbeat` cannot be scheduled: expression `61 * * * *`"),
        "{text}"
    );
    assert!(
        text.contains("`billing::send_invoices` cannot be scheduled:")
            && text.contains("Mars/Olympus"),
        "{text}"
    );
}

#[test]
fn status_flags_an_overdue_job_of_the_active_deployment() {
    let db = Database::migrated("overdue");
    let runtime = current_thread();
    // A replica registers and then dies between runs: the row stays idle with a past instant.
    let (store, _runner) = runtime.block_on(replica(&db.url));
    drop(store);
    drop(runtime);
    db.admin_in(
        "UPDATE cron_jobs SET next_execution = now() - interval '10 minutes 5 seconds'; \
         UPDATE cron_runners SET last_seen = now() - interval '1 hour'",
    );

    let json = db.json(&["status"]);
    let job = &json["modules"][0]["jobs"][0];
    let overdue = job["overdue_secs"].as_u64().unwrap_or_default();
    assert!((605..620).contains(&overdue), "{json}");
    let output = db.cronverb(&["status"]);
    let text = stdout(&output);
    assert!(text.contains("idle, overdue 10m"), "{text}");
    assert!(
        text.contains("`billing::heartbeat` is overdue by 10m") && text.contains("no live replica"),
        "{text}"
    );

    // Paused, it is not overdue: it waits for `resume`.
    let output = db.cronverb(&["pause", "billing::heartbeat"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json = db.json(&["status"]);
    assert_eq!(json["modules"][0]["jobs"][0]["overdue_secs"], Value::Null);
    // A job due now is not overdue either.
    db.admin_in(
        "UPDATE cron_jobs SET paused = false, next_execution = now() + interval '1 minute'",
    );
    let json = db.json(&["status"]);
    assert_eq!(json["modules"][0]["jobs"][0]["overdue_secs"], Value::Null);
    assert!(!stdout(&db.cronverb(&["status"])).contains("overdue"));
}

const TWO_MODULES: &str = r#"{
  "version": 1,
  "modules": [
    { "name": "big", "verbs": [
        { "name": "big::v0", "cron": { "expression": "0 * * * *" } },
        { "name": "big::v1", "cron": { "expression": "0 * * * *" } } ] },
    { "name": "big2", "verbs": [
        { "name": "big::v0", "cron": { "expression": "0 * * * *" } } ] },
    { "name": "big3", "verbs": [
        { "name": "big::v0", "cron": { "expression": "0 * * * *" } } ] }
  ]
}"#;

#[test]
fn a_verb_in_several_modules_asks_for_the_module_and_suggestions_do_not_repeat() {
    let db = Database::migrated("ambiguous");
    let file = db.schema_file(TWO_MODULES);
    for module in ["big", "big2", "big3"] {
        let key = format!("{module}@1");
        let output = db.cronverb(&[
            "deploy",
            "--deployment",
            &key,
            "--module",
            module,
            file.path(),
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }

    // Named in full, in three modules: only `--module` can tell them apart.
    let output = db.cronverb(&["pause", "big::v0"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: verb `big::v0` is in several modules: `big`, `big2`, `big3`; choose one with `--module`\n"
    );
    // By its short name: the same.
    let output = db.cronverb(&["pause", "v0"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: verb `v0` is ambiguous; it may be `big::v0` of module `big`, `big::v0` of module `big2` \
         or `big::v0` of module `big3`; choose one with `--module`\n"
    );
    let output = db.cronverb(&["pause", "big::v0", "--module", "big2"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("paused `big::v0`"));

    // Each close name once.
    let output = db.cronverb(&["trigger", "big::v9"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: unknown verb `big::v9`; did you mean `big::v0` or `big::v1`?\n"
    );
    let output = db.cronverb(&["runs", "--verb", "cleanup"]);
    assert_eq!(
        stderr(&output),
        "error: unknown verb `cleanup`; expected one of: `big::v0`, `big::v1`\n"
    );
}

#[test]
fn every_bad_argument_is_a_usage_error() {
    let db = Database::migrated("bad_arguments");
    for args in [
        &["runs", "--since", "9999999d"][..],
        &["runs", "--since", "1000000h"],
        &["runs", "--since", "99999999999999999999d"],
        &["runs", "--since", "0s"],
        &["runs", "--limit", "0"],
        &["prune", "--older-than", "9999999d"],
        &["prune", "--older-than", "0s"],
        &["status", "--database-url", ""],
        &["status", "--database-url", "not a url"],
    ] {
        let output = db.cronverb(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}{}",
            stdout(&output),
            stderr(&output)
        );
        assert!(
            !stderr(&output).contains("out of range"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    // The longest age accepted still works.
    let output = db.cronverb(&["runs", "--since", "36500d"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = db.cronverb(&["prune", "--older-than", "36500d"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn deploy_says_what_changes_relative_to_the_active_deployment() {
    let db = Database::migrated("deploy_changes");
    let v1 = db.schema_file(SCHEMA);
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", v1.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("module `billing` has no active deployment: 2 added\n"),
        "{}",
        stdout(&output)
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_store, _runner) = runtime.block_on(replica(&db.url));

    // The next version keeps `send_invoices`, drops `heartbeat` and adds `reminders`.
    let v2 = db.schema_file(
        r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::send_invoices",
          "cron": { "expression": "0 2 * * *", "timezone": "Europe/Berlin", "timeout": "10m" } },
        { "name": "billing::reminders", "cron": { "expression": "0 9 * * 1" } }
      ]
    }
  ]
}"#,
    );
    let output = db.cronverb(&["deploy", "--deployment", "billing@2", v2.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "registered deployment `billing@2` of module `billing` (inactive until its first replica runs)",
            "against the active deployment `billing@1`: 1 added, 1 removed, 0 changed, 1 unchanged",
        ],
        "{text}"
    );
    let row = |verb: &str| {
        lines
            .iter()
            .find(|line| line.trim_start().starts_with(verb))
            .unwrap_or_else(|| panic!("no row of `{verb}` in:\n{text}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_owned()
    };
    assert_eq!(row("billing::reminders"), "added");
    assert_eq!(row("billing::send_invoices"), "unchanged");
    assert_eq!(row("billing::heartbeat"), "removed");

    let deployed = db.json(&["deploy", "--deployment", "billing@2", v2.path()]);
    let changes = &deployed["changes"];
    assert_eq!(changes["compared_with"], "billing@1");
    assert_eq!(changes["added"], serde_json::json!(["billing::reminders"]));
    assert_eq!(changes["removed"][0]["verb"], "billing::heartbeat");
    assert_eq!(changes["removed"][0]["expression"], "*/5 * * * *");
    assert_eq!(changes["changed"], serde_json::json!([]));
    assert_eq!(changes["unchanged"], 1);
    assert_eq!(deployed["jobs"][0]["verb"], "billing::reminders");
    assert_eq!(deployed["jobs"][0]["change"], "added");
    assert_eq!(deployed["jobs"][1]["change"], "unchanged");
}

#[test]
fn deploy_refuses_a_schema_above_the_limit_before_connecting() {
    let verbs: Vec<String> = (0..=100_000)
        .map(|i| format!(r#"{{"name":"big::v{i}","cron":{{"expression":"0 0 * * *"}}}}"#))
        .collect();
    let path = std::env::temp_dir().join(format!("cronverb-big-{}.json", std::process::id()));
    std::fs::write(
        &path,
        format!(
            r#"{{"version":1,"modules":[{{"name":"big","verbs":[{}]}}]}}"#,
            verbs.join(",")
        ),
    )
    .unwrap();
    let file = SchemaFile(path);
    // Nothing listens there: the refusal comes before any connection.
    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["deploy", "--deployment", "big@1", file.path()])
        .args(["--database-url", "postgres://postgres@127.0.0.1:1/none"])
        .output()
        .unwrap();
    assert_eq!(
        stderr(&output),
        "error: invalid schema: module `big` has 100001 jobs, more than the 100000 a deployment \
         may have (docs/operations.md): split them into several modules\n"
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn trigger_wait_exits_with_the_outcome_of_the_triggered_run() {
    let db = Database::migrated("trigger_wait");
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&db.url));
    // Paused, the verb's regular occurrences (every 5 minutes) are not claimed and cannot take the
    // trigger; a trigger still runs it.
    db.json(&["pause", "heartbeat"]);
    let waiting = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args([
            "trigger",
            "heartbeat",
            "--wait",
            "--json",
            "--timeout",
            "1m",
        ])
        .env("DATABASE_URL", &db.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let run_id = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        let claims = loop {
            let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
            if !claimed.claims.is_empty() {
                break claimed.claims;
            }
            assert!(Instant::now() < deadline, "no trigger to claim after 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let claim = &claims[0];
        store
            .finish(
                &runner,
                &[Finish {
                    run_id: claim.run_id,
                    job_id: claim.job_id,
                    outcome: Outcome::TimedOut,
                    error: Some("ran past its timeout of 1m".to_owned()),
                    ended_at: None,
                    started_at: Some(claim.scheduled_at),
                    retry_after: None,
                }],
                None,
            )
            .await
            .single()
            .unwrap();
        claim.run_id
    });
    let output = waiting.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let run: Value = serde_json::from_str(stdout(&output)).expect("--json prints the run");
    assert_eq!(run["id"], run_id);
    assert_eq!(run["outcome"], "timed_out");
    assert_eq!(run["manual"], true);
    assert_eq!(run["error"], "ran past its timeout of 1m");
    drop(store);
}

#[test]
fn status_shows_each_jobs_missed_policy_and_catch_up_window() {
    // docs/operations.md, "status": the policy and the window a late occurrence still runs in.
    let db = Database::migrated("missed");
    let file = db.schema_file(
        r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::export", "cron": { "expression": "0 * * * *", "missed": "all" } },
        { "name": "billing::rollup",
          "cron": { "expression": "*/5 * * * *", "missed": "all", "catch_up": "2h" } },
        { "name": "billing::tick", "cron": { "expression": "*/5 * * * *" } }
      ]
    }
  ]
}"#,
    );
    let output = db.cronverb(&["deploy", "--deployment", "billing@1", file.path()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let status = db.json(&["status"]);
    let shown: Vec<(Value, Value, Value)> = status["modules"][0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["verb"].clone(),
                j["missed"].clone(),
                j["catch_up_secs"].clone(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("billing::export".into(), "all".into(), 86_400.into()),
            ("billing::rollup".into(), "all".into(), 7200.into()),
            ("billing::tick".into(), "once".into(), Value::Null),
        ]
    );

    let output = db.cronverb(&["status"]);
    let text = stdout(&output);
    let row = |verb: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(verb))
            .unwrap_or_else(|| panic!("no row of `{verb}`: {text}"))
            .split("  ")
            .map(str::trim)
            .filter(|cell| !cell.is_empty())
            .collect::<Vec<_>>()
    };
    assert_eq!(row("VERB")[3], "MISSED", "{text}");
    assert_eq!(row("billing::export")[3], "all 24h", "{text}");
    assert_eq!(row("billing::rollup")[3], "all 2h", "{text}");
    assert_eq!(row("billing::tick")[3], "once", "{text}");
}

/// `schema diff --database-url` shows each override stored in PostgreSQL and what runs of it after a
/// deploy (tests/support/drift.rs).
#[test]
fn schema_diff_with_a_database_shows_the_overrides_and_what_runs_after_the_deploy() {
    let db = Database::migrated("schema_diff");
    drift::the_diff_shows_each_override_and_what_runs_after_the_deploy(
        &db.url,
        "pg-schema-diff",
        |args| db.cronverb(args),
    );
}
