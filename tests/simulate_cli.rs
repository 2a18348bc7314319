//! `cronverb simulate`: what an outage would do to each job, read from a schema file, as a user or a
//! script runs it (docs/operations.md, "Simulating an outage").
#![cfg(feature = "cli")]

use std::process::{Command, Output};

use cronverb::{Cron, MissedPolicy, RunOn, Schema, Verb};

fn cronverb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .expect("the cronverb binary runs")
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("standard output is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("standard error is UTF-8")
}

/// A schema file of the minutely jobs of docs/runtime.md, "Missed runs", one per policy.
fn schema_file(name: &str) -> std::path::PathBuf {
    let minutely = |policy| Cron::new("* * * * *").missed(policy);
    // In the order the output lists them.
    let schema = Schema::new([
        (
            "billing",
            Verb::new("billing::all", minutely(MissedPolicy::All).catch_up("5m")),
        ),
        (
            "billing",
            Verb::new(
                "billing::cache",
                Cron::new("* * * * *").on(RunOn::EveryReplica),
            ),
        ),
        (
            "billing",
            Verb::new("billing::once", minutely(MissedPolicy::Once)),
        ),
        (
            "billing",
            Verb::new("billing::skip", minutely(MissedPolicy::Skip)),
        ),
    ]);
    let path = std::env::temp_dir().join(format!(
        "cronverb-simulate-{}-{name}.json",
        std::process::id()
    ));
    std::fs::write(&path, schema.to_json()).unwrap();
    path
}

const DOWN: [&str; 3] = ["--down", "2026-01-01T00:00:30Z", "2026-01-01T00:10:30Z"];

#[test]
fn simulate_prints_what_each_policy_runs_and_skips_after_an_outage() {
    let path = schema_file("text");
    let mut args = vec!["simulate"];
    args.extend(DOWN);
    args.push(path.to_str().unwrap());
    let output = cronverb(&args);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "down from 2026-01-01T00:00:30Z to 2026-01-01T00:10:30Z, back at 2026-01-01T00:10:30Z\n\
         \n\
         billing billing::all (missed=all catch_up=5m)\n\
         \x20 skip  5 occurrences from 2026-01-01T00:01:00Z\n\
         \x20 run   2026-01-01T00:06:00Z at 2026-01-01T00:10:30Z (late)\n\
         \x20 run   2026-01-01T00:07:00Z at 2026-01-01T00:10:30Z (late)\n\
         \x20 run   2026-01-01T00:08:00Z at 2026-01-01T00:10:30Z (late)\n\
         \x20 run   2026-01-01T00:09:00Z at 2026-01-01T00:10:30Z (late)\n\
         \x20 run   2026-01-01T00:10:00Z at 2026-01-01T00:10:30Z\n\
         \x20 next  2026-01-01T00:11:00Z\n\
         \n\
         billing billing::cache (missed=once)\n\
         \x20 runs on every replica: each replica runs the occurrences that come while it is up, and none is missed\n\
         \n\
         billing billing::once (missed=once)\n\
         \x20 run   2026-01-01T00:01:00Z at 2026-01-01T00:10:30Z (late)\n\
         \x20 skip  9 occurrences from 2026-01-01T00:02:00Z\n\
         \x20 next  2026-01-01T00:11:00Z\n\
         \n\
         billing billing::skip (missed=skip)\n\
         \x20 skip  10 occurrences from 2026-01-01T00:01:00Z\n\
         \x20 next  2026-01-01T00:11:00Z\n"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn simulate_json_lists_each_jobs_events() {
    let path = schema_file("json");
    let mut args = vec!["simulate"];
    args.extend(DOWN);
    args.extend([
        "--up-at",
        "2026-01-01T00:12:30Z",
        "--json",
        path.to_str().unwrap(),
    ]);
    let output = cronverb(&args);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let jobs: serde_json::Value = serde_json::from_str(stdout(&output)).unwrap();
    let all = &jobs[0];
    assert_eq!(all["verb"], "billing::all");
    assert_eq!(all["missed"], "all");
    assert_eq!(all["catch_up_secs"], 300);
    // Back at 00:12:30: the window starts at 00:07:30.
    assert_eq!(
        all["events"][0],
        serde_json::json!({"kind": "skipped", "first": "2026-01-01T00:01:00Z", "count": 7})
    );
    assert_eq!(
        all["events"][1],
        serde_json::json!({
            "kind": "run",
            "scheduled_at": "2026-01-01T00:08:00Z",
            "at": "2026-01-01T00:12:30Z",
            "late": true
        })
    );
    assert_eq!(all["events"].as_array().unwrap().len(), 6);
    assert_eq!(all["next"], "2026-01-01T00:13:00Z");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn simulate_refuses_an_outage_that_ends_before_it_starts_a_bad_instant_and_a_zero_tolerance() {
    let path = schema_file("bad");
    let output = cronverb(&[
        "simulate",
        "--down",
        "2026-01-01T00:10:30Z",
        "2026-01-01T00:00:30Z",
        path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("ends"), "{}", stderr(&output));
    let output = cronverb(&[
        "simulate",
        "--down",
        "yesterday",
        "today",
        path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("RFC 3339"), "{}", stderr(&output));
    // A tolerance the runtime refuses (under 1 s) would simulate what no replica does.
    let output = cronverb(&[
        "simulate",
        "--down",
        "2026-01-01T00:00:30Z",
        "2026-01-01T00:10:30Z",
        "--tolerance",
        "0",
        path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--tolerance"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn simulate_reads_the_active_deployments_schema_from_the_database_and_writes_nothing() {
    use cron_runtime::store::sqlite::SqliteStore;
    use cron_runtime::store::{DeploymentSpec, JobSpec, Store};
    use cronverb::{Schedule, ZonedSchedule};
    use std::time::Duration;

    let path = std::env::temp_dir().join(format!("cronverb-simulate-{}.db", std::process::id()));
    let url = format!("sqlite://{}", path.display());
    let remove = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    remove();
    let output = cronverb(&["migrate", "--database-url", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let schema = Schema::new([(
        "billing",
        Verb::new(
            "billing::rollup",
            Cron::new("0 * * * *")
                .missed(MissedPolicy::All)
                .catch_up("3h"),
        ),
    )]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let count_runs = |store: &SqliteStore| {
        runtime.block_on(async {
            cronverb::sqlx::query_scalar::<_, i64>("SELECT count(*) FROM cron_job_runs")
                .fetch_one(store.pool())
                .await
                .unwrap()
        })
    };
    let store = runtime.block_on(async {
        let store = SqliteStore::connect(&url).await.unwrap();
        let job = JobSpec {
            verb: "billing::rollup".to_owned(),
            expression: "0 * * * *".to_owned(),
            zone: cronverb::Tz::UTC,
            schedule: ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap()),
            timeout: Duration::from_secs(60),
            missed: MissedPolicy::All,
            retry: Default::default(),
            lease: None,
            on: Default::default(),
            catch_up: Some(Duration::from_secs(3 * 3600)),
            jitter: None,
            expect_within: None,
            fixed: false,
        };
        store
            .register(&DeploymentSpec {
                key: "billing@1".to_owned(),
                module: "billing".to_owned(),
                schema: schema.to_json(),
                jobs: vec![job],
            })
            .await
            .unwrap();
        store
    });

    let output = cronverb(&[
        "simulate",
        "--down",
        "2026-01-01T00:30:00Z",
        "2026-01-01T10:30:00Z",
        "--database-url",
        &url,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "down from 2026-01-01T00:30:00Z to 2026-01-01T10:30:00Z, back at 2026-01-01T10:30:00Z\n\
         \n\
         billing billing::rollup (missed=all catch_up=3h)\n\
         \x20 skip  7 occurrences from 2026-01-01T01:00:00Z\n\
         \x20 run   2026-01-01T08:00:00Z at 2026-01-01T10:30:00Z (late)\n\
         \x20 run   2026-01-01T09:00:00Z at 2026-01-01T10:30:00Z (late)\n\
         \x20 run   2026-01-01T10:00:00Z at 2026-01-01T10:30:00Z (late)\n\
         \x20 next  2026-01-01T11:00:00Z\n"
    );
    assert_eq!(count_runs(&store), 0, "nothing written");
    drop(store);
    remove();
}
