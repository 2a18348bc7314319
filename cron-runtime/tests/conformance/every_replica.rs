//! Jobs on every replica in the store (docs/runtime.md, "Jobs on every replica"): registered with
//! their deployment so that an operator sees, pauses and resumes them, never claimed, and every replica
//! hears a pause through the store's wake-up and reads it.

use cron_schema::RunOn;

use super::*;

/// `job` on every replica.
pub fn on_every_replica(mut job: JobSpec) -> JobSpec {
    job.on = RunOn::EveryReplica;
    job
}

pub async fn a_job_on_every_replica_is_registered_never_claimed_nor_triggered(
    h: impl StoreUnderTest,
) {
    let jobs = || vec![job("a", SECONDLY), on_every_replica(job("e", SECONDLY))];
    let (store, runner) = replica(&h, &deployment("billing@1", jobs())).await;
    // Its row has no occurrence, and is never claimed, however long it waits.
    assert_eq!(h.next_execution(MODULE, "e").await, None);
    let at = h.next_execution(MODULE, "a").await.unwrap();
    sleep_until(&h, at + ms(1_200)).await;
    assert_eq!(verbs(&claim(&store, &runner).await), ["a"]);
    // An operator can name it: a trigger is refused as such, a pause and a resume leave it without
    // an occurrence.
    let refused = h.trigger("e").await.unwrap_err();
    assert!(refused.contains("runs on every replica"), "{refused}");
    h.pause("e").await;
    h.resume("e").await;
    assert_eq!(h.next_execution(MODULE, "e").await, None);
    // A takeover leaves it alone too.
    let (new, new_runner) = replica(&h, &deployment("billing@2", jobs())).await;
    assert_eq!(h.next_execution(MODULE, "e").await, None);
    let at = h.now().await;
    sleep_until(&h, next_second(at) + ms(1_200)).await;
    assert!(!verbs(&claim(&new, &new_runner).await).contains(&"e"));
    // A deployment where it runs on one replica starts it after now.
    let (last, last_runner) = replica(
        &h,
        &deployment("billing@3", vec![job("a", SECONDLY), job("e", SECONDLY)]),
    )
    .await;
    let next = h
        .next_execution(MODULE, "e")
        .await
        .expect("scheduled again");
    sleep_until(&h, next + ms(50)).await;
    assert!(verbs(&claim(&last, &last_runner).await).contains(&"e"));
}

pub async fn a_pause_of_a_job_on_every_replica_wakes_every_replica_which_reads_it(
    h: impl StoreUnderTest,
) {
    let spec = deployment(
        "billing@1",
        vec![job("a", YEARLY), on_every_replica(job("e", SECONDLY))],
    );
    let (one, one_runner) = replica(&h, &spec).await;
    let (two, two_runner) = replica(&h, &spec).await;
    let none: Vec<String> = Vec::new();
    assert_eq!(one.every_replica(&one_runner, None).await.unwrap(), none);
    let ((), change) = woken_by(&two, h.pause("e")).await;
    assert_eq!(change, Some(Change::Claim), "a pause wakes the replicas");
    for (store, runner) in [(&one, &one_runner), (&two, &two_runner)] {
        assert_eq!(store.every_replica(runner, None).await.unwrap(), ["e"]);
    }
    // A pause of a job on one replica is not theirs.
    h.pause("a").await;
    assert_eq!(two.every_replica(&two_runner, None).await.unwrap(), ["e"]);
    let (next, change) = woken_by(&one, h.resume("e")).await;
    assert_eq!(change, Some(Change::Claim), "a resume wakes the replicas");
    assert_eq!(
        next, None,
        "a job on every replica has no next run in the store"
    );
    for (store, runner) in [(&one, &one_runner), (&two, &two_runner)] {
        assert_eq!(store.every_replica(runner, None).await.unwrap(), none);
    }
    assert_eq!(h.next_execution(MODULE, "e").await, None);
}

pub async fn a_replica_reports_its_last_runs_of_its_jobs_on_every_replica(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![on_every_replica(job("e", SECONDLY))]);
    let (store, runner) = replica(&h, &spec).await;
    let now = h.now().await;
    let ran = [ReplicaRun {
        verb: "e".to_owned(),
        scheduled_at: now,
        finished_at: now + ms(20),
        outcome: Outcome::Failed,
        error: Some("a \"quoted\" error\nover two lines".to_owned()),
    }];
    // Recorded (or, in memory, accepted) twice over, and no run goes into the history.
    for _ in 0..2 {
        assert_eq!(
            store.every_replica(&runner, Some(&ran)).await.unwrap(),
            Vec::<String>::new()
        );
    }
    assert!(h.runs().await.is_empty());
}
