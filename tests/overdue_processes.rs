//! Notifications with real processes on PostgreSQL (docs/operations.md, "Notifications", "Overdue"):
//! three replicas of one deployment run a job that fails at every occurrence and is expected to succeed
//! within two seconds of its instant. Each replica prints every event its listener hears to its output;
//! across the three, each failed occurrence is heard once as `failed`, and each occurrence found overdue
//! once as `overdue`, by whichever replica recorded it. And a run whose replica is killed mid-attempt:
//! the attempts another replica runs after taking it back are heard once each, `failed` then
//! `retries_exhausted`.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

// The run-history analysis `support` re-exports is not used here.
#[allow(unused_imports)]
mod support;

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::{Event, JobOptions};
use support::{Cluster, TestDb, first_attempt, wait_for};

const MODULE: &str = "od";
const DEPLOYMENT: &str = "od@1";
const VERB: &str = "od::nightly";
const REPLICAS: [&str; 3] = ["a", "b", "c"];

/// A job whose first attempt outlasts the test (its replica is killed during it) and whose later
/// attempts fail.
const CRASH: &str = "od::crash";
const CRASH_DEPLOYMENT: &str = "od@crash";

/// Prints each event the replica's listener hears: `EVENT kind verb occurrence attempt`.
fn print_event(event: &Event) {
    println!(
        "EVENT {} {} {} {}",
        event.kind(),
        event.verb(),
        event.scheduled_at().to_rfc3339(),
        event.attempt()
    );
}

#[test]
fn replica_main() {
    support::replica_entry(|builder, jobs| {
        if jobs == "crash" {
            // The runtime's lease is ten times the job's own: the run is taken back after the job's.
            return builder
                .lease(Duration::from_secs(30))
                .job_with(
                    CRASH,
                    "*/10 * * * * *",
                    JobOptions::new()
                        .retries(2)
                        .backoff(Duration::from_secs(1))
                        .lease(Duration::from_secs(3)),
                    || async {
                        if cronverb::context().attempt() == 1 {
                            support::execute(600, Duration::from_millis(100)).await?;
                        }
                        Err::<(), _>("the upstream service answered 503".to_owned())
                    },
                )
                .on_event(print_event);
        }
        builder
            .job_with(
                VERB,
                "*/6 * * * * *",
                JobOptions::new().expect_within(Duration::from_secs(2)),
                || async { Err::<(), _>("the upstream service answered 503") },
            )
            .on_event(print_event)
    });
}

/// How many times each (kind, occurrence) of `VERB` was heard, across the replicas' outputs.
fn heard(cluster: &Cluster) -> HashMap<(String, String), usize> {
    heard_of(cluster, &REPLICAS, VERB).into_iter().fold(
        HashMap::new(),
        |mut heard, ((kind, at, _), count)| {
            *heard.entry((kind, at)).or_insert(0) += count;
            heard
        },
    )
}

/// How many times each (kind, occurrence, attempt) of `verb` was heard, across the outputs of
/// `replicas`.
fn heard_of(
    cluster: &Cluster,
    replicas: &[&str],
    verb: &str,
) -> HashMap<(String, String, String), usize> {
    let mut heard = HashMap::new();
    for name in replicas {
        for line in cluster.log(name).lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("EVENT") {
                continue;
            }
            let (Some(kind), Some(of), Some(at), Some(attempt)) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                continue;
            };
            assert_eq!(of, verb, "{line}");
            *heard
                .entry((kind.to_owned(), at.to_owned(), attempt.to_owned()))
                .or_insert(0) += 1;
        }
    }
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_overdue_occurrence_is_heard_once_across_three_replicas() -> anyhow::Result<()> {
    let db = TestDb::create("od").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    for name in REPLICAS {
        cluster.spawn(name, DEPLOYMENT, "all")?;
    }
    wait_for(
        "three occurrences reported overdue",
        Duration::from_secs(40),
        || async {
            let overdue = heard(&cluster)
                .keys()
                .filter(|(kind, _)| kind == "overdue")
                .count();
            Ok((overdue >= 3).then_some(()))
        },
    )
    .await?;
    cluster.stop(&REPLICAS, Duration::from_secs(10))?;

    let heard = heard(&cluster);
    let twice: Vec<_> = heard.iter().filter(|(_, count)| **count > 1).collect();
    assert!(twice.is_empty(), "heard more than once: {twice:?}");
    // Every occurrence reported overdue failed first, and its failure was heard too.
    for (kind, at) in heard.keys() {
        if kind == "overdue" {
            assert!(
                heard.contains_key(&("failed".to_owned(), at.clone())),
                "{at}: {heard:?}"
            );
        }
    }
    // The store recorded each report once: the row holds the latest occurrence reported.
    let notified: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT overdue_notified_for FROM cron_jobs WHERE verb = $1")
            .bind(VERB)
            .fetch_one(&db.pool)
            .await?;
    let latest = heard
        .keys()
        .filter(|(kind, _)| kind == "overdue")
        .map(|(_, at)| DateTime::parse_from_rfc3339(at).unwrap())
        .max();
    assert_eq!(notified.map(|at| at.fixed_offset()), latest);
    Ok(())
}

/// A run taken back after its replica died (issue 24, point 4): `kill -9` of the replica running the
/// first attempt of a `retries = 2, lease = "3s"` job, on three replicas. Another takes the run back
/// (the attempt `abandoned`, which raises nothing), and the two attempts after it fail: across the
/// replicas, the second is heard once as `failed`, the third once as `retries_exhausted`, and nothing
/// else of the occurrence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempts_after_a_replica_died_are_heard_once_across_the_replicas() -> anyhow::Result<()>
{
    let db = TestDb::create("odc").await?;
    let mut cluster = Cluster::new("replica_main", MODULE, &db)?;
    println!("replica logs: {}", cluster.logs_dir().display());
    for name in REPLICAS {
        cluster.spawn(name, CRASH_DEPLOYMENT, "crash")?;
    }
    let (run_id, first, scheduled_at) = first_attempt(&db.pool, CRASH).await?;
    cluster.kill9(&first)?;
    println!("killed {first}, running run {run_id} of {scheduled_at}");
    let attempts: serde_json::Value =
        wait_for("the run to end", Duration::from_secs(30), || async {
            Ok(sqlx::query_scalar::<_, Option<serde_json::Value>>(
                "SELECT attempts FROM cron_job_runs WHERE id = $1 AND outcome <> 'running'",
            )
            .bind(run_id)
            .fetch_optional(&db.pool)
            .await?
            .flatten())
        })
        .await?;
    let survivors: Vec<&str> = REPLICAS.into_iter().filter(|name| *name != first).collect();
    cluster.stop(&survivors, Duration::from_secs(10))?;
    let outcomes: Vec<&str> = attempts
        .as_array()
        .expect("an array")
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["abandoned", "failed", "failed"], "{attempts}");

    let at = scheduled_at.to_rfc3339();
    let heard = heard_of(&cluster, &REPLICAS, CRASH);
    let mut of_run: Vec<(&str, &str, usize)> = heard
        .iter()
        .filter(|((_, of, _), _)| *of == at)
        .map(|((kind, _, attempt), count)| (kind.as_str(), attempt.as_str(), *count))
        .collect();
    of_run.sort();
    assert_eq!(
        of_run,
        [("failed", "2", 1), ("retries_exhausted", "3", 1)],
        "{heard:?}"
    );
    Ok(())
}
