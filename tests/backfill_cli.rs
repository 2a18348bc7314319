//! `cronverb backfill` on a SQLite file, run as an operator runs it (docs/operations.md, "Backfill"):
//! the real binary queues, a replica of the test's own (a `SqliteStore` on the same file) claims and
//! records what it queued. A backfill of 100 occurrences run twice records 100 runs.
#![cfg(feature = "cli")]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use cron_runtime::store::sqlite::SqliteStore;
use cron_runtime::store::{DeploymentSpec, Finish, JobSpec, Outcome, Runner, Store};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};
use serde_json::Value;

const SCHEMA: &str = r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::heartbeat", "cron": { "expression": "*/5 * * * *" } }
      ]
    }
  ]
}"#;

/// A SQLite file of its own, deleted with its WAL files when the test ends.
struct File {
    path: PathBuf,
    url: String,
}

impl File {
    fn new(test: &str) -> File {
        let path = std::env::temp_dir().join(format!(
            "cronverb-backfill-{test}-{}.db",
            std::process::id()
        ));
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
}

impl Drop for File {
    fn drop(&mut self) {
        self.remove();
    }
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("standard output is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("standard error is UTF-8")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A replica of `billing@1` running the heartbeat job, registered in this process on the file.
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
                catch_up: None,
                jitter: None,
                expect_within: None,
                fixed: false,
                on: Default::default(),
            }],
        })
        .await
        .unwrap();
    (store, runner)
}

/// Claims and succeeds what the replica is given, one claim at a time, until a claim takes nothing;
/// returns the occurrences of the backfill runs, in the order they ran.
fn run_backfills(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    runner: &Runner,
) -> Vec<String> {
    runtime.block_on(async {
        let mut ran = Vec::new();
        loop {
            let claimed = store.claim_due(runner, Duration::ZERO, 10).await.unwrap();
            let Some(claim) = claimed.claims.iter().find(|c| c.backfill) else {
                return ran;
            };
            assert_eq!(claimed.claims.len(), 1, "one run at a time: {claimed:?}");
            let finish = Finish {
                run_id: claim.run_id,
                job_id: claim.job_id,
                outcome: Outcome::Succeeded,
                error: None,
                ended_at: None,
                started_at: None,
                retry_after: None,
            };
            store
                .finish(runner, &[finish], None)
                .await
                .single()
                .unwrap();
            ran.push(
                claim
                    .scheduled_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
        }
    })
}

#[test]
fn a_backfill_of_100_occurrences_run_twice_records_100_runs() {
    let file = File::new("hundred");
    file.json(&["migrate"]);
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&file.url));
    // 100 occurrences of `*/5 * * * *`: 500 minutes from midnight.
    let window = [
        "backfill",
        "heartbeat",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T08:20:00Z",
    ];

    // A dry run says what it would queue, and queues nothing.
    let mut dry = window.to_vec();
    dry.push("--dry-run");
    let planned = file.json(&dry);
    assert_eq!(planned["dry_run"], true);
    assert_eq!(planned["occurrences"], 100);
    assert_eq!(planned["queued"].as_array().unwrap().len(), 100);
    assert_eq!(planned["queued"][0]["scheduled_at"], "2026-01-01T00:00:00Z");
    assert_eq!(
        planned["queued"][99]["scheduled_at"],
        "2026-01-01T08:15:00Z"
    );
    assert!(run_backfills(&runtime, &store, &runner).is_empty());

    let queued = file.json(&window);
    assert_eq!(queued["verb"], "billing::heartbeat");
    assert_eq!(queued["deployment"], "billing@1");
    assert_eq!(queued["dry_run"], false);
    assert_eq!(queued["queued"].as_array().unwrap().len(), 100);
    assert_eq!(
        (
            queued["already_ran"].clone(),
            queued["already_queued"].clone()
        ),
        (0.into(), 0.into())
    );

    // The progress shows in `status`.
    let status = file.json(&["status"]);
    let job = &status["modules"][0]["jobs"][0];
    assert_eq!(job["backfill"]["queued"], 100, "{status}");
    assert_eq!(job["backfill"]["next"], "2026-01-01T00:00:00Z");
    let output = file.cronverb(&["status"]);
    assert!(
        stdout(&output).contains("backfill: 100 queued from 2026-01-01T00:00:00Z"),
        "{}",
        stdout(&output)
    );

    let ran = run_backfills(&runtime, &store, &runner);
    assert_eq!(ran.len(), 100);
    let expected: Vec<String> = queued["queued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["scheduled_at"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ran, expected, "in order");
    assert_eq!(
        file.json(&["status"])["modules"][0]["jobs"][0].get("backfill"),
        None
    );

    // The same backfill again repeats nothing.
    let again = file.json(&window);
    assert_eq!(again["queued"].as_array().unwrap().len(), 0);
    assert_eq!(again["already_ran"], 100);
    assert!(run_backfills(&runtime, &store, &runner).is_empty());
    let output = file.cronverb(&window);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).starts_with(
            "backfilling 0 occurrence(s) of `billing::heartbeat` of deployment `billing@1` from \
             2026-01-01T00:00:00Z to 2026-01-01T08:20:00Z\n100 occurrence(s) in the window: 100 \
             ran already, 0 queued already\n"
        ),
        "{}",
        stdout(&output)
    );

    let runs = file.json(&["runs", "--verb", "heartbeat", "--limit", "1000"]);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 100);
    assert!(
        runs.iter()
            .all(|r| r["backfill"] == true && r["manual"] == true)
    );
    let output = file.cronverb(&["runs", "--verb", "heartbeat", "--limit", "3"]);
    assert!(stdout(&output).contains("backfill"), "{}", stdout(&output));
    drop(store);
}

#[test]
fn a_backfill_is_refused_with_its_reason_and_cancelled_before_it_starts() {
    let file = File::new("refused");
    file.json(&["migrate"]);
    let runtime = current_thread();
    let (store, runner) = runtime.block_on(replica(&file.url));

    // More occurrences than the per-deployment job limit: `*/5` over a year is 105,120.
    let output = file.cronverb(&[
        "backfill",
        "heartbeat",
        "--from",
        "2025-01-01T00:00:00Z",
        "--to",
        "2026-01-01T00:00:00Z",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "error: the backfill of `billing::heartbeat` from 2025-01-01T00:00:00Z to \
         2026-01-01T00:00:00Z has more than 100000 occurrences (the per-deployment job limit); \
         backfill a shorter window, one after the other\n"
    );
    let output = file.cronverb(&[
        "backfill",
        "heartbeat",
        "--from",
        "yesterday",
        "--to",
        "now",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("expected an RFC 3339 instant such as `2026-03-01T00:00:00Z`"),
        "{}",
        stderr(&output)
    );
    let output = file.cronverb(&["backfill", "heartbeat"]);
    assert_eq!(output.status.code(), Some(2));

    let queued = file.json(&[
        "backfill",
        "heartbeat",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T01:00:00Z",
    ]);
    assert_eq!(queued["queued"].as_array().unwrap().len(), 12);
    let cancelled = file.json(&["backfill", "heartbeat", "--cancel"]);
    assert_eq!(cancelled["cancelled"], 12);
    assert!(run_backfills(&runtime, &store, &runner).is_empty());
    let output = file.cronverb(&["backfill", "heartbeat", "--cancel"]);
    assert_eq!(
        stdout(&output),
        "cancelled the backfill of `billing::heartbeat`: 0 queued occurrence(s) dropped\n"
    );
    drop(store);
}
