//! Notifications with real processes on PostgreSQL (docs/operations.md, "Notifications", "Overdue"):
//! three replicas of one deployment run a job that fails at every occurrence and is expected to succeed
//! within two seconds of its instant. Each replica prints every event its listener hears to its output;
//! across the three, each failed occurrence is heard once as `failed`, and each occurrence found overdue
//! once as `overdue`, by whichever replica recorded it.
//!
//! The replicas are this test binary re-executed (`replica_main`, which returns at once in a normal run).

// The run-history analysis `support` re-exports is not used here.
#[allow(unused_imports)]
mod support;

use std::collections::HashMap;
use std::time::Duration;

use cronverb::{Event, JobOptions};
use support::{Cluster, TestDb, wait_for};

const MODULE: &str = "od";
const DEPLOYMENT: &str = "od@1";
const VERB: &str = "od::nightly";
const REPLICAS: [&str; 3] = ["a", "b", "c"];

#[test]
fn replica_main() {
    support::replica_entry(|builder, _jobs| {
        builder
            .job_with(
                VERB,
                "*/6 * * * * *",
                JobOptions::new().expect_within(Duration::from_secs(2)),
                || async { Err::<(), _>("the upstream service answered 503") },
            )
            .on_event(|event: &Event| {
                println!(
                    "EVENT {} {} {}",
                    event.kind(),
                    event.verb(),
                    event.scheduled_at().to_rfc3339()
                );
            })
    });
}

/// How many times each (kind, occurrence) was heard, across the replicas' outputs.
fn heard(cluster: &Cluster) -> HashMap<(String, String), usize> {
    let mut heard = HashMap::new();
    for name in REPLICAS {
        for line in cluster.log(name).lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("EVENT") {
                continue;
            }
            let (Some(kind), Some(verb), Some(at)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            assert_eq!(verb, VERB, "{line}");
            *heard.entry((kind.to_owned(), at.to_owned())).or_insert(0) += 1;
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
    let notified: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT overdue_notified_for FROM cron_jobs WHERE verb = $1")
            .bind(VERB)
            .fetch_one(&db.pool)
            .await?;
    let latest = heard
        .keys()
        .filter(|(kind, _)| kind == "overdue")
        .map(|(_, at)| chrono::DateTime::parse_from_rfc3339(at).unwrap())
        .max();
    assert_eq!(notified.map(|at| at.fixed_offset()), latest);
    Ok(())
}
