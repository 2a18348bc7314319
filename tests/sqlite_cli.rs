//! The database commands of `cronverb` on a SQLite file (`sqlite://…`), run as an operator runs them:
//! each test has a file of its own in the system's temporary directory, and drives the real binary on it
//! while a replica of its own (a `SqliteStore` on the same file) claims what the commands ask for.
#![cfg(feature = "cli")]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use cron_runtime::store::sqlite::SqliteStore;
use cron_runtime::store::{DeploymentSpec, Finish, JobSpec, Outcome, Runner, Store};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use serde_json::Value;

#[path = "support/drift.rs"]
mod drift;

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

/// A SQLite file of its own (not created yet), deleted with its WAL files when the test ends.
struct File {
    path: PathBuf,
    url: String,
}

impl File {
    fn new(test: &str) -> File {
        let path =
            std::env::temp_dir().join(format!("cronverb-cli-{test}-{}.db", std::process::id()));
        let file = File {
            url: format!("sqlite://{}", path.display()),
            path,
        };
        file.remove();
        file
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }

    /// Runs `cronverb` with `DATABASE_URL` set to this file.
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

    fn schema_file(&self) -> PathBuf {
        let path = self.path.with_extension("json");
        std::fs::write(&path, SCHEMA).unwrap();
        path
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.remove();
        let _ = std::fs::remove_file(self.path.with_extension("json"));
    }
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("standard output is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("standard error is UTF-8")
}

/// A runtime for the test's own store: a store's pool lives on the runtime that made it.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A replica of `billing@1` (the build of `SCHEMA`) running the heartbeat job, registered in this
/// process on the file.
async fn replica(url: &str) -> (SqliteStore, Runner) {
    let store = SqliteStore::connect(url).await.unwrap();
    let runner = store
        .register(&DeploymentSpec {
            key: "billing@1".to_owned(),
            module: "billing".to_owned(),
            schema: SCHEMA.to_owned(),
            jobs: vec![JobSpec {
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
            }],
        })
        .await
        .unwrap();
    (store, runner)
}

#[test]
fn only_migrate_creates_the_file_and_other_schemes_are_refused() {
    let file = File::new("migrate");
    let output = file.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("`cronverb migrate` creates it"),
        "{}",
        stderr(&output)
    );
    assert!(!file.path.exists(), "status created the file");

    let output = file.cronverb(&["migrate"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "cronverb's tables are up to date (migration 0014)\n"
    );
    assert_eq!(file.json(&["migrate"])["version"], 14);
    let output = file.cronverb(&["status"]);
    assert_eq!(stdout(&output), "no deployment is registered\n");

    let output = file.cronverb(&["status", "--database-url", "mysql://app:s3cret@db/prod"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "error: unsupported database URL `mysql://app:***@db/prod`: scheme `mysql` is not one of \
         `postgres://`, `postgresql://`, `sqlite://`\n"
    );
    let output = file.cronverb(&["status", "--database-url", "sqlite::memory:"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("in-memory store"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn deploy_status_pause_resume_trigger_runs_and_prune_on_a_file() {
    let file = File::new("commands");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let schema = file.schema_file();
    let schema = schema.to_str().unwrap();

    let deployed = file.json(&["deploy", "--deployment", "billing@1", schema]);
    assert_eq!(deployed["created"], true);
    assert_eq!(deployed["active"], false);
    assert_eq!(deployed["jobs"][1]["verb"], "billing::send_invoices");
    assert_eq!(deployed["jobs"][1]["change"], "added");
    assert!(deployed["jobs"][1]["next_execution"].is_string());
    let again = file.json(&["deploy", "--deployment", "billing@1", schema]);
    assert_eq!(again["created"], false);

    let status = file.json(&["status"]);
    let billing = &status["modules"][0];
    assert_eq!(billing["active_deployment"], Value::Null);
    assert_eq!(billing["deployments"][0]["key"], "billing@1");
    let local = billing["jobs"][1]["next_execution_local"].as_str().unwrap();
    assert!(local.contains("T02:00:00+0"), "{local}");

    let output = file.cronverb(&["pause", "send_invoice"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("did you mean `billing::send_invoices`?"),
        "{}",
        stderr(&output)
    );
    let paused = file.json(&["pause", "send_invoices", "--note", "INC-7 relay down"]);
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["changed"], true);
    let output = file.cronverb(&["status"]);
    assert!(
        stdout(&output).contains("`billing::send_invoices` is paused: INC-7 relay down"),
        "{}",
        stdout(&output)
    );
    let resumed = file.json(&["resume", "billing::send_invoices"]);
    assert_eq!(resumed["paused"], false);
    assert_eq!(resumed["changed"], true);

    // No replica has run: nothing to trigger on.
    let output = file.cronverb(&["trigger", "heartbeat"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("has no active deployment"),
        "{}",
        stderr(&output)
    );

    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&file.url));
    let triggered = file.json(&["trigger", "heartbeat"]);
    assert_eq!(triggered["deployment"], "billing@1");
    assert_eq!(triggered["live_replicas"], 1);
    assert_eq!(triggered["already_pending"], false);
    let claimed = runtime.block_on(async {
        let claimed = store.claim_due(&runner, Duration::ZERO, 10).await.unwrap();
        assert_eq!(claimed.claims.len(), 1, "the trigger is claimed");
        claimed
    });
    let output = file.cronverb(&["trigger", "heartbeat"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("is executing"),
        "{}",
        stderr(&output)
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

    let runs = file.json(&["runs", "--verb", "heartbeat", "--since", "1h"]);
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["manual"], true);
    assert_eq!(runs[0]["outcome"], "failed");
    assert_eq!(runs[0]["lateness_ms"], 300);
    assert!(runs[0]["claimed_at"].is_string(), "{runs}");
    assert_eq!(runs[0]["deployment"], "billing@1");
    assert_eq!(runs[0]["scheduled_at"], triggered["requested_at"]);
    let output = file.cronverb(&["runs"]);
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
    let status = file.json(&["status"]);
    assert_eq!(status["modules"][0]["active_deployment"], "billing@1");
    assert_eq!(status["modules"][0]["deployments"][0]["live_replicas"], 1);
    assert_eq!(
        status["modules"][0]["jobs"][0]["last_run"]["outcome"],
        "failed"
    );

    // Of two runs that finished days ago, the older goes; the later, the verb's latest success, stays
    // for `previous_success()` however old (docs/operations.md, "Retention"), as does today's.
    runtime.block_on(async {
        for days in [3, 2] {
            let ago = (chrono::Utc::now() - chrono::TimeDelta::days(days)).timestamp_micros();
            sqlx::query(
                "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, \
                 outcome, runner, runner_id) VALUES ('billing', 'billing::heartbeat', ?1, ?1, ?1, \
                 'succeeded', 'old:1', 0)",
            )
            .bind(ago)
            .execute(store.pool())
            .await
            .unwrap();
        }
    });
    assert_eq!(file.json(&["runs"]).as_array().unwrap().len(), 3);
    let pruned = file.json(&["prune", "--older-than", "1d"]);
    assert_eq!(pruned["deleted"], 1);
    let runs = file.json(&["runs"]);
    assert_eq!(runs.as_array().unwrap().len(), 2);
    assert_eq!(runs[0]["manual"], true);
    drop(store);
}

#[test]
fn runs_show_each_attempt_of_a_retried_occurrence_and_a_pending_retry_on_a_file() {
    let file = File::new("attempts");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, _runner) = runtime.block_on(replica(&file.url));
    let at = |text: &str| {
        cron_runtime::chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_micros()
    };
    // An occurrence whose retries the next occurrence cut short, and one whose retry is pending: the
    // job row is held idle at the retry's instant for it.
    runtime.block_on(async {
        sqlx::query(
            "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, \
             outcome, error, runner, runner_id, attempts) VALUES ('billing', 'billing::heartbeat', \
             ?1, ?1, ?2, 'failed', 'retries cut short by the next occurrence', 'h:1', 0, ?3)",
        )
        .bind(at("2026-03-08T10:00:00Z"))
        .bind(at("2026-03-08T10:00:35Z"))
        .bind(
            r#"[{"outcome":"failed","error":"boom","started_at":"2026-03-08T10:00:00Z","finished_at":"2026-03-08T10:00:01.500Z"},{"outcome":"timed_out","error":"ran past its timeout of 30s","started_at":"2026-03-08T10:00:05Z","finished_at":"2026-03-08T10:00:35Z"}]"#,
        )
        .execute(store.pool())
        .await
        .unwrap();
        seed_pending_retry(&store).await;
    });

    let runs = file.json(&["runs"]);
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(runs[0]["outcome"], "retrying");
    assert_eq!(runs[0]["retry_at"], "2026-03-08T11:00:12Z");
    assert_eq!(runs[0]["attempts"][0]["error"], "the relay said no");
    assert_eq!(runs[1]["outcome"], "failed");
    assert_eq!(runs[1]["retry_at"], Value::Null);
    assert_eq!(runs[1]["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(runs[1]["attempts"][1]["outcome"], "timed_out");

    let output = file.cronverb(&["runs", "--verb", "heartbeat"]);
    let text = stdout(&output);
    assert!(
        text.contains("retrying  1+ ") && text.contains("retry at 2026-03-08T11:00:12Z"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n  attempt 2  timed_out  2026-03-08T10:00:05Z  30.000s  ran past its timeout of 30s\n"
        ),
        "{text}"
    );
    drop(store);
}

#[test]
fn resume_reports_no_next_run_in_the_past_and_cuts_short_a_retry_overtaken_while_paused() {
    // docs/operations.md, "Pause and resume": a pending retry whose occurrence's successor came while
    // the verb was paused ends at the resume, and the verb goes on at its first occurrence after it.
    let file = File::new("resume_retry");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, _runner) = runtime.block_on(replica(&file.url));
    runtime.block_on(async {
        seed_pending_retry(&store).await;
    });
    assert_eq!(file.json(&["pause", "billing::heartbeat"])["paused"], true);
    let before = chrono::Utc::now();
    let output = file.cronverb(&["resume", "billing::heartbeat"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let next = text
        .lines()
        .find_map(|line| line.strip_prefix("next run at "))
        .unwrap_or_else(|| panic!("no next run: {text}"));
    let next = cron_runtime::chrono::DateTime::parse_from_rfc3339(next).unwrap();
    assert!(
        next > before,
        "resume reports a next run in the past: {text}"
    );
    let runs = file.json(&["runs"]);
    assert_eq!(runs[0]["outcome"], "failed", "{runs}");
    assert_eq!(runs[0]["error"], "retries cut short by the next occurrence");
    assert_eq!(runs[0]["attempts"][0]["error"], "the relay said no");
    assert_eq!(runs[0]["started_at"], "2026-03-08T11:00:00Z");
    drop(store);
}

/// Claims what is due for `runner` (waiting up to 10 s for a trigger to be asked for) and finishes every
/// claim with `outcome` and `error`. Returns the ids of the runs finished.
fn finish_due(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    runner: &Runner,
    outcome: Outcome,
    error: Option<&str>,
) -> Vec<i64> {
    runtime.block_on(async {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let claims = loop {
            let claimed = store.claim_due(runner, Duration::ZERO, 10).await.unwrap();
            if !claimed.claims.is_empty() {
                break claimed.claims;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no trigger to claim after 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let finishes: Vec<Finish> = claims
            .iter()
            .map(|claim| Finish {
                run_id: claim.run_id,
                job_id: claim.job_id,
                outcome,
                error: error.map(str::to_owned),
                ended_at: None,
                started_at: Some(claim.scheduled_at),
                retry_after: None,
            })
            .collect();
        store
            .finish(runner, &finishes, None)
            .await
            .single()
            .unwrap();
        claims.iter().map(|claim| claim.run_id).collect()
    })
}

#[test]
fn trigger_wait_exits_with_the_outcome_of_the_run_it_caused() {
    let file = File::new("wait");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&file.url));
    // Paused, the verb's regular occurrences (every 5 minutes) are not claimed and cannot take a
    // trigger; a trigger still runs it.
    file.json(&["pause", "heartbeat"]);

    // An earlier trigger's run, which failed: a later wait must not take it for its own.
    file.json(&["trigger", "heartbeat"]);
    let earlier = finish_due(
        &runtime,
        &store,
        &runner,
        Outcome::Failed,
        Some("an earlier failure"),
    );

    // Nothing claims the trigger: `--timeout` ends the wait (exit 4), and the trigger stays pending.
    let output = file.cronverb(&["trigger", "heartbeat", "--wait", "--timeout", "1s"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("triggered `billing::heartbeat` of deployment `billing@1` at "),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).starts_with("error: the run of `billing::heartbeat` triggered at ")
            && stderr(&output).contains("had not ended after 1s"),
        "{}",
        stderr(&output)
    );

    // A wait on the pending trigger returns when the run it caused ends, not with the earlier one.
    let waiting = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["trigger", "heartbeat", "--wait", "--json"])
        .env("DATABASE_URL", &file.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waiting = waiting;
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the wait ended before the triggered run did"
    );
    let succeeded = finish_due(&runtime, &store, &runner, Outcome::Succeeded, None);
    let output = waiting.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run: Value = serde_json::from_str(stdout(&output)).expect("--json prints the run");
    assert_eq!(run["outcome"], "succeeded");
    assert_eq!(run["manual"], true);
    assert_eq!(run["id"], succeeded[0]);
    assert_ne!(run["id"], earlier[0]);

    // A run that fails: exit 3, with its outcome and error.
    let waiting = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["trigger", "billing::heartbeat", "--wait", "--timeout", "1m"])
        .env("DATABASE_URL", &file.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let failed = finish_due(
        &runtime,
        &store,
        &runner,
        Outcome::Failed,
        Some("the relay said no"),
    );
    let output = waiting.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let last = stdout(&output).lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "run {} of `billing::heartbeat` failed after ",
            failed[0]
        )) && last.ends_with("s: the relay said no"),
        "{}",
        stdout(&output)
    );
    assert_eq!(stderr(&output), "");

    // `--timeout` without `--wait` is a usage error.
    let output = file.cronverb(&["trigger", "heartbeat", "--timeout", "1m"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    drop(store);
}

#[test]
fn status_lists_each_live_replica_with_its_heartbeat() {
    let file = File::new("replicas");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, _runner) = runtime.block_on(replica(&file.url));
    let status = file.json(&["status"]);
    let replica = &status["modules"][0]["deployments"][0]["replicas"][0];
    let name = replica["name"].as_str().unwrap();
    let started = replica["started_at"].as_str().unwrap();
    let seen = replica["last_seen"].as_str().unwrap();
    // Whole seconds, as the text shows every instant.
    let whole = |at: &str| {
        cron_runtime::chrono::DateTime::parse_from_rfc3339(at)
            .unwrap()
            .to_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };

    let output = file.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let header = text
        .lines()
        .find(|line| line.trim_start().starts_with("REPLICA"))
        .unwrap_or_else(|| panic!("no replica table:\n{text}"));
    assert!(
        header.contains("DEPLOYMENT")
            && header.contains("STARTED (UTC)")
            && header.contains("LAST SEEN (UTC)")
            && header.contains("LIVE"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|line| line.trim_start().starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no line for replica {name}:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            name,
            "billing@1",
            whole(started).as_str(),
            whole(seen).as_str(),
            "yes"
        ],
        "{text}"
    );
    drop(store);

    // A deployment registered ahead has no replica: the text says so.
    let ahead = File::new("replicas-ahead");
    assert_eq!(ahead.json(&["migrate"])["migrated"], true);
    let schema = ahead.schema_file();
    ahead.json(&[
        "deploy",
        "--deployment",
        "billing@2",
        schema.to_str().unwrap(),
    ]);
    let output = ahead.cronverb(&["status"]);
    assert!(
        stdout(&output).contains("\n  no live replica\n"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn every_command_refuses_a_file_that_a_newer_release_contracted() {
    let file = File::new("contracted");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, _runner) = runtime.block_on(replica(&file.url));
    runtime.block_on(async {
        sqlx::query("UPDATE cron_compatibility SET required_migration = 10000")
            .execute(store.pool())
            .await
            .unwrap();
    });
    let schema = file.schema_file();
    let schema = schema.to_str().unwrap();
    for args in [
        &["status"][..],
        &["runs"],
        &["pause", "heartbeat"],
        &["resume", "heartbeat"],
        &["trigger", "heartbeat"],
        &["prune"],
        &["deploy", "--deployment", "billing@2", schema],
    ] {
        let output = file.cronverb(args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stdout(&output)
        );
        assert_eq!(stdout(&output), "", "{args:?}");
        let message = stderr(&output);
        assert!(
            message.contains("require migration 10000 or later")
                && message.contains("knows migrations up to 0014"),
            "{args:?}: {message}"
        );
    }
    // Nothing was written: no pause, no trigger, no deployment.
    let (paused, triggered, deployments): (i64, i64, i64) = runtime.block_on(async {
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM cron_jobs WHERE paused), \
             (SELECT count(*) FROM cron_jobs WHERE trigger_requested_at IS NOT NULL), \
             (SELECT count(*) FROM cron_deployments)",
        )
        .fetch_one(store.pool())
        .await
        .unwrap()
    });
    assert_eq!((paused, triggered, deployments), (0, 0, 1));
    // `migrate` refuses it too, as before.
    let output = file.cronverb(&["migrate"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    drop(store);
}

#[test]
fn prune_refuses_a_malformed_file_as_status_does() {
    let file = File::new("malformed");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    // Everything in the file itself, then one page of an index that `status` reads and a pruning
    // statement does not: the page of `cron_deployments_module`.
    let (page, size) = current_thread().block_on(async {
        let store = SqliteStore::connect(&file.url).await.unwrap();
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(store.pool())
            .await
            .unwrap();
        let page: i64 = sqlx::query_scalar(
            "SELECT rootpage FROM sqlite_master WHERE name = 'cron_deployments_module'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        let size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(store.pool())
            .await
            .unwrap();
        store.pool().close().await;
        (page, size)
    });
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut db = std::fs::OpenOptions::new()
            .write(true)
            .open(&file.path)
            .unwrap();
        db.seek(SeekFrom::Start((page - 1) as u64 * size as u64))
            .unwrap();
        db.write_all(&vec![0xff; size as usize]).unwrap();
    }
    let output = file.cronverb(&["status"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stderr(&output).contains("malformed"), "{}", stderr(&output));
    let output = file.cronverb(&["prune", "--older-than", "1d"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with("error: while checking the SQLite file before changing it: ")
            && stderr(&output).contains("malformed"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn trigger_wait_follows_a_regular_occurrence_that_took_the_trigger() {
    let file = File::new("wait-regular");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&file.url));
    // An occurrence is due: the claim that takes the trigger runs it as a regular run, which
    // satisfies the trigger (docs/operations.md, "Trigger").
    runtime.block_on(async {
        sqlx::query("UPDATE cron_jobs SET next_execution = ?1 WHERE verb = 'billing::heartbeat'")
            .bind((chrono::Utc::now() - chrono::TimeDelta::seconds(1)).timestamp_micros())
            .execute(store.pool())
            .await
            .unwrap();
    });
    let waiting = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["trigger", "heartbeat", "--wait", "--timeout", "1m"])
        .env("DATABASE_URL", &file.url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Claimed once the trigger is asked for, not before.
    runtime.block_on(async {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let pending: bool = sqlx::query_scalar(
                "SELECT trigger_requested_at IS NOT NULL FROM cron_jobs \
                 WHERE verb = 'billing::heartbeat'",
            )
            .fetch_one(store.pool())
            .await
            .unwrap();
            if pending {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no trigger after 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let finished = finish_due(&runtime, &store, &runner, Outcome::Succeeded, None);
    assert_eq!(
        finished.len(),
        1,
        "one claim took the occurrence and the trigger"
    );
    let output = waiting.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let last = stdout(&output).lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!(
            "run {} of `billing::heartbeat` succeeded after ",
            finished[0]
        )) && last.ends_with(" (a regular occurrence due when the trigger was claimed)"),
        "{}",
        stdout(&output)
    );
    // The trigger was taken: none is pending, and no manual run was recorded.
    let status = file.json(&["status"]);
    let job = &status["modules"][0]["jobs"][0];
    assert_eq!(job["verb"], "billing::heartbeat");
    assert_eq!(job["trigger_requested_at"], Value::Null, "{status}");
    let runs = file.json(&["runs"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["manual"], false);
    drop(store);
}

/// Writes, as a replica would have, the occurrence of 11:00 of `billing::heartbeat` whose first attempt
/// failed ("the relay said no"), its retry pending at 11:00:12 on the job row.
async fn seed_pending_retry(store: &SqliteStore) {
    let at = |text: &str| {
        cron_runtime::chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_micros()
    };
    let pending: i64 = sqlx::query_scalar(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, outcome, \
         runner, runner_id, attempts) VALUES ('billing', 'billing::heartbeat', ?1, ?1, \
         'running', 'h:1', 0, ?2) RETURNING id",
    )
    .bind(at("2026-03-08T11:00:00Z"))
    .bind(
        r#"[{"outcome":"failed","error":"the relay said no","started_at":"2026-03-08T11:00:00Z","finished_at":"2026-03-08T11:00:02Z"}]"#,
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    sqlx::query("UPDATE cron_jobs SET next_execution = ?1, retry_run_id = ?2")
        .bind(at("2026-03-08T11:00:12Z"))
        .bind(pending)
        .execute(store.pool())
        .await
        .unwrap();
}

#[test]
fn audit_lists_who_acted_newest_first_as_text_and_json_and_prune_keeps_it_unless_asked() {
    let file = File::new("audit");
    file.json(&["migrate"]);
    let schema = file.schema_file();
    let schema = schema.to_str().unwrap();
    file.json(&["deploy", "--deployment", "billing@1", schema]);
    // A hostile note: the terminal sees it escaped.
    let output = file.cronverb(&[
        "pause",
        "send_invoices",
        "--note",
        "relay \u{1b}[2J down",
        "--actor",
        "alice",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Refused (unknown verb): nothing recorded.
    assert_eq!(file.cronverb(&["resume", "nope"]).status.code(), Some(2));
    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["resume", "send_invoices"])
        .env("DATABASE_URL", &file.url)
        .env("USER", "bob")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    file.json(&["prune", "--older-than", "30d"]);

    let audit = file.json(&["audit"]);
    let rows = audit.as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["prune", "resume", "pause", "deploy"]);
    let pause = &rows[2];
    assert_eq!(pause["actor"], "alice");
    assert_eq!(pause["origin"], "cli");
    assert!(pause["host"].is_string());
    assert_eq!(pause["module"], "billing");
    assert_eq!(pause["verb"], "billing::send_invoices");
    assert_eq!(pause["note"], "relay \u{1b}[2J down");
    assert_eq!(pause["before"]["paused"], false);
    assert_eq!(pause["after"]["paused"], true);
    assert!(pause["at"].is_string() && pause["id"].is_i64());
    assert_eq!(rows[1]["actor"], "bob", "the OS user without --actor");

    let by_verb = file.json(&["audit", "--verb", "send_invoices", "--since", "7d"]);
    assert_eq!(by_verb.as_array().unwrap().len(), 2);
    let at = pause["at"].as_str().unwrap();
    let since_pause = file.json(&["audit", "--since", at]);
    assert!(
        since_pause
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["id"] == pause["id"]),
        "--since takes an instant, inclusive: {since_pause}"
    );
    let future = file.json(&["audit", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(future.as_array().unwrap().len(), 0, "{future}");
    assert_eq!(
        file.json(&["audit", "--limit", "1"])
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let output = file.cronverb(&["audit", "--verb", "billing::send_invoices"]);
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("AT (UTC)") && lines[0].contains("ACTOR  FROM"),
        "{text}"
    );
    assert!(
        lines[1].contains("bob") && lines[1].contains("resume"),
        "{text}"
    );
    assert!(
        lines[2].contains("alice") && lines[2].contains("pause"),
        "{text}"
    );
    assert!(
        lines[2].contains("relay \\u{1b}[2J down"),
        "escaped: {text}"
    );
    assert!(!text.contains('\u{1b}'));

    // `prune --audit-older-than` is the trail's retention: every row here is younger than a day.
    let pruned = file.json(&["prune", "--audit-older-than", "1d"]);
    assert_eq!(pruned["audit_deleted"], 0);
    // Two actions, two rows: the runs' prune, then the trail's.
    let audit = file.json(&["audit"]);
    let rows = audit.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0]["after"]["audit_deleted"], 0);
    assert_eq!(rows[1]["after"]["runs_deleted"], 0);
}

#[test]
fn status_shows_a_jobs_jitter_its_offset_and_its_next_start() {
    let file = File::new("jitter");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let path = file.path.with_extension("json");
    std::fs::write(
        &path,
        r#"{ "version": 1, "modules": [ { "name": "billing", "verbs": [
            { "name": "billing::nightly_report", "cron": { "expression": "0 0 * * *", "jitter": "10m" } },
            { "name": "billing::heartbeat", "cron": { "expression": "*/5 * * * *" } }
        ] } ] }"#,
    )
    .unwrap();
    let deployed = file.json(&[
        "deploy",
        "--deployment",
        "billing@1",
        path.to_str().unwrap(),
    ]);
    assert_eq!(deployed["created"], true);

    let status = file.json(&["status"]);
    let jobs = &status["modules"][0]["jobs"];
    let (heartbeat, nightly) = (&jobs[0], &jobs[1]);
    assert_eq!(nightly["verb"], "billing::nightly_report");
    assert_eq!(nightly["jitter"], "10m");
    let offset = cronverb::jitter_offset(
        "billing",
        "billing::nightly_report",
        Duration::from_secs(600),
    );
    assert_eq!(
        nightly["jitter_offset_ms"],
        u64::try_from(offset.as_millis()).unwrap()
    );
    // The row keeps the instant; the start is the instant plus the offset.
    let next = cron_runtime::chrono::DateTime::parse_from_rfc3339(
        nightly["next_execution"].as_str().unwrap(),
    )
    .unwrap();
    let start =
        cron_runtime::chrono::DateTime::parse_from_rfc3339(nightly["next_start"].as_str().unwrap())
            .unwrap();
    assert_eq!(
        start - next,
        cron_runtime::chrono::TimeDelta::from_std(offset).unwrap()
    );
    assert_eq!(next.timestamp() % 86_400, 0);
    // A job without jitter has none of the three.
    for key in ["jitter", "jitter_offset_ms", "next_start"] {
        assert!(heartbeat.get(key).is_none(), "{key}: {heartbeat}");
    }

    let text = stdout(&file.cronverb(&["status"])).to_owned();
    assert!(
        text.contains("`billing::nightly_report` has a jitter of 10m: each occurrence starts "),
        "{text}"
    );
}

#[test]
fn reschedule_shows_the_drift_in_status_keeps_it_across_a_deploy_and_reset_returns_to_the_code() {
    let file = File::new("reschedule");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let schema = file.schema_file();
    let schema = schema.to_str().unwrap();
    file.json(&["deploy", "--deployment", "billing@1", schema]);

    // The expression is checked as `cronverb check` checks it, with its caret; a bad zone is refused.
    let output = file.cronverb(&["reschedule", "send_invoices", "0 25 * * *"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("1 | 0 25 * * *") && stderr(&output).contains("^^"),
        "{}",
        stderr(&output)
    );
    let output = file.cronverb(&[
        "reschedule",
        "send_invoices",
        "0 3 * * *",
        "--timezone",
        "Mars/Olympus",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        file.json(&["status"])["modules"][0]["jobs"][1]
            .get("override")
            .is_none()
    );

    let done = file.json(&[
        "reschedule",
        "send_invoices",
        "*/30 * * * *",
        "--note",
        "INC-9 catch up",
        "--actor",
        "alice",
    ]);
    assert_eq!(done["overridden"], true);
    assert_eq!(done["changed"], true);
    // Read in the code's zone unless told.
    assert_eq!(
        (&done["expression"], &done["timezone"]),
        (&Value::from("*/30 * * * *"), &Value::from("Europe/Berlin"))
    );
    assert_eq!(done["code_expression"], "0 2 * * *");

    let job = &file.json(&["status"])["modules"][0]["jobs"][1];
    assert_eq!(job["verb"], "billing::send_invoices");
    assert_eq!(job["expression"], "*/30 * * * *");
    assert_eq!(job["override"]["code_expression"], "0 2 * * *");
    assert_eq!(job["override"]["by"], "alice");
    assert_eq!(job["override"]["note"], "INC-9 catch up");
    let text = stdout(&file.cronverb(&["status"])).to_owned();
    assert!(
        text.contains(
            "`billing::send_invoices` runs its override `*/30 * * * *` in Europe/Berlin, not its \
             code's `0 2 * * *` in Europe/Berlin (set by alice at "
        ) && text.contains("overridden"),
        "{text}"
    );

    // A deployment registered later starts its row at the override.
    let before = cron_runtime::chrono::Utc::now();
    let deployed = file.json(&["deploy", "--deployment", "billing@2", schema]);
    let next = deployed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["verb"] == "billing::send_invoices")
        .unwrap()["next_execution"]
        .as_str()
        .unwrap()
        .to_owned();
    let invoices = deployed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["verb"] == "billing::send_invoices")
        .unwrap();
    assert_eq!(invoices["expression"], "*/30 * * * *");
    assert_eq!(invoices["code_expression"], "0 2 * * *");
    assert_eq!(invoices["matches"], true);
    let next = cron_runtime::chrono::DateTime::parse_from_rfc3339(&next).unwrap();
    let half_hourly = ZonedSchedule::new(
        Schedule::parse("*/30 * * * *").unwrap(),
        chrono_tz::Tz::Europe__Berlin,
    );
    assert_eq!(
        Some(next.to_utc()),
        half_hourly.next_after(before),
        "every half hour, as the override says"
    );

    // A deploy of the same key again says what the code says and what runs.
    let text = stdout(&file.cronverb(&["deploy", "--deployment", "billing@2", schema])).to_owned();
    assert!(
        text.contains(
            "`billing::send_invoices`: the code now says `0 2 * * *` in Europe/Berlin; the override \
             `*/30 * * * *` in Europe/Berlin still runs until `cronverb reschedule \
             billing::send_invoices --reset`"
        ),
        "{text}"
    );

    let reset = file.json(&["reschedule", "send_invoices", "--reset", "--actor", "bob"]);
    assert_eq!(reset["overridden"], false);
    assert_eq!(reset["expression"], "0 2 * * *");
    let job = &file.json(&["status"])["modules"][0]["jobs"][1];
    assert_eq!(job["expression"], "0 2 * * *");
    assert!(job.get("override").is_none(), "{job}");

    // One audit row each, with the schedule before and after.
    let rows = file.json(&["audit", "--verb", "send_invoices"]);
    let rows = rows.as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["reset", "reschedule"]);
    assert_eq!(rows[1]["actor"], "alice");
    assert_eq!(rows[1]["before"]["schedule"], "0 2 * * *");
    assert_eq!(rows[1]["after"]["schedule"], "*/30 * * * *");
    assert_eq!(rows[1]["after"]["overridden"], true);
    assert_eq!(rows[0]["after"]["schedule"], "0 2 * * *");
    assert_eq!(rows[0]["after"]["overridden"], false);
}

#[test]
fn a_fixed_verb_refuses_an_override_and_a_deploy_that_marks_it_fixed_drops_one() {
    let file = File::new("fixed");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    let schema = file.schema_file();
    let schema = schema.to_str().unwrap();
    file.json(&["deploy", "--deployment", "billing@1", schema]);
    file.json(&[
        "reschedule",
        "send_invoices",
        "*/30 * * * *",
        "--actor",
        "alice",
    ]);

    // The next build declares the verb fixed: its registration drops the override and says so.
    let fixed = file.path.with_extension("fixed.json");
    std::fs::write(
        &fixed,
        SCHEMA.replace(
            r#""timeout": "10m" }"#,
            r#""timeout": "10m", "fixed": true }"#,
        ),
    )
    .unwrap();
    let fixed = fixed.to_str().unwrap();
    let output = file.cronverb(&["deploy", "--deployment", "billing@2", fixed]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            "`billing::send_invoices`: the code declares it `fixed`: the override `*/30 * * * *` \
             in Europe/Berlin is dropped, and the code's schedule runs from this deployment's \
             takeover"
        ),
        "{}",
        stdout(&output)
    );
    let deployed = &file.json(&["audit"]);
    let deploy = deployed
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["action"] == "deploy" && row["after"]["key"] == "billing@2")
        .unwrap_or_else(|| panic!("{deployed}"));
    assert_eq!(
        deploy["after"]["dropped_overrides"][0]["verb"],
        "billing::send_invoices"
    );

    // An override of the fixed verb is refused, with nothing changed and no audit row.
    let output = file.cronverb(&["reschedule", "send_invoices", "*/10 * * * *"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "`billing::send_invoices` is declared `fixed` (`#[cron(..., fixed)]`): its schedule \
             cannot be overridden"
        ),
        "{}",
        stderr(&output)
    );
    let rows = file.json(&["audit", "--verb", "send_invoices"]);
    let actions: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["reschedule"], "alice's only");
}

/// `schema diff --database-url` shows each override stored in a SQLite file and what runs of it after
/// a deploy (tests/support/drift.rs).
#[test]
fn schema_diff_with_a_database_shows_the_overrides_and_what_runs_after_the_deploy() {
    let file = File::new("schema_diff");
    assert_eq!(file.json(&["migrate"])["migrated"], true);
    drift::the_diff_shows_each_override_and_what_runs_after_the_deploy(
        &file.url,
        "sqlite-schema-diff",
        |args| file.cronverb(args),
    );
}
