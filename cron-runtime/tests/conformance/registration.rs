//! Registration: a deployment key is one set of jobs (docs/operations.md, "Deployment keys"), registered
//! once and shared by its replicas.

use cron_runtime::store::{DeploymentSpec, JobSpec, Store, StoreError};

use super::*;

pub async fn a_first_registration_activates_its_deployment_and_schedules_after_now(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY), job("b", YEARLY)]);
    let before = h.now().await;
    let (store, runner) = replica(&h, &spec).await;
    let after = h.now().await;
    // Active, idle, at the first occurrence after the registration.
    let a = h
        .next_execution(MODULE, "a")
        .await
        .expect("`a` is scheduled");
    assert!(
        a > before && a <= next_second(after),
        "{a} {before} {after}"
    );
    assert_eq!(
        h.next_execution(MODULE, "b").await,
        zoned(YEARLY).next_after(before)
    );
    assert!(
        runner.name.ends_with(&format!(":{}", std::process::id())),
        "a runner is named `host:pid`: {runner:?}"
    );

    // Registering the same key again adds a runner, not a deployment or jobs: once due, `a` runs once,
    // for the replica that owns the occurrence (docs/runtime.md, "How work is spread").
    let again = store.register(&spec).await.unwrap();
    assert_eq!(again.deployment_id, runner.deployment_id);
    assert_ne!(again.id, runner.id);
    sleep_until(&h, a + ms(100)).await;
    let first = claim(&store, &again).await;
    let second = claim(&store, &runner).await;
    assert_eq!([verbs(&first), verbs(&second)].concat(), ["a"]);
    assert!(claim(&store, &runner).await.claims.is_empty());
    assert!(claim(&store, &again).await.claims.is_empty());
}

pub async fn a_key_registered_for_another_module_is_refused(h: impl StoreUnderTest) {
    let spec = deployment("billing@1", vec![job("a", SECONDLY)]);
    replica(&h, &spec).await;
    let other = DeploymentSpec {
        module: "shipping".to_owned(),
        ..spec.clone()
    };
    let error = h.replica(defaults()).register(&other).await.unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "deployment `billing@1` is registered for module `billing`, not `shipping`"
    );
}

pub async fn a_key_registered_again_with_other_jobs_is_refused_and_keeps_its_jobs(
    h: impl StoreUnderTest,
) {
    let first: Vec<JobSpec> = (1..=4)
        .map(|i| job(&format!("rtapp::first{i}"), YEARLY))
        .collect();
    let v1 = deployment("rtapp@1", first.clone());
    let (_store, runner) = replica(&h, &v1).await;

    // Another build under the same key: six other verbs.
    let other = deployment(
        "rtapp@1",
        (1..=6)
            .map(|i| job(&format!("rtapp::other{i}"), SECONDLY))
            .collect(),
    );
    let error = h.replica(defaults()).register(&other).await.unwrap_err();
    let StoreError::Invalid(message) = &error else {
        panic!("not a refusal that retrying cannot change: {error}");
    };
    assert_eq!(
        message,
        "deployment `rtapp@1` is registered with other jobs: this schema adds 6 verbs \
         (`rtapp::other1`, `rtapp::other2`, `rtapp::other3`, `rtapp::other4`, `rtapp::other5` and 1 \
         more), removes 4 (`rtapp::first1`, `rtapp::first2`, `rtapp::first3`, `rtapp::first4`); a \
         deployment key is one set of jobs: give this version its own key, such as its version \
         number or commit (docs/operations.md)"
    );
    // One changed schedule is refused too, and says how.
    let mut changed = first.clone();
    changed[0] = job("rtapp::first1", SECONDLY);
    let error = h
        .replica(defaults())
        .register(&deployment("rtapp@1", changed))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("changes 1 verb (`rtapp::first1`: expression `0 0 1 1 *` -> `* * * * * *`)"),
        "{error}"
    );
    // The key keeps its jobs.
    for i in 1..=4 {
        let verb = format!("rtapp::first{i}");
        assert!(h.next_execution(MODULE, &verb).await.is_some(), "{verb}");
    }
    assert_eq!(h.next_execution(MODULE, "rtapp::other1").await, None);

    // Another replica of the same build is welcome, whatever its docs or sources say.
    let mut same = deployment("rtapp@1", first);
    same.schema = same.schema.replace(
        r#""name":"rtapp::first1""#,
        r#""name":"rtapp::first1","doc":"moved","source":{"file":"src/moved.rs","line":9}"#,
    );
    assert_ne!(same.schema, v1.schema);
    let (_, again) = replica(&h, &same).await;
    assert_eq!(again.deployment_id, runner.deployment_id);
}

pub async fn a_deployment_above_the_job_limit_is_refused_before_anything_is_written(
    h: impl StoreUnderTest,
) {
    let one = job("big::v", YEARLY);
    let jobs: Vec<JobSpec> = (0..=100_000)
        .map(|i| JobSpec {
            verb: format!("big::v{i}"),
            ..one.clone()
        })
        .collect();
    let spec = DeploymentSpec {
        key: "big@1".to_owned(),
        module: "big".to_owned(),
        schema: "{}".to_owned(),
        jobs,
    };
    let error = h.replica(defaults()).register(&spec).await.unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "deployment `big@1` has 100001 jobs, more than the 100000 a deployment may have \
         (docs/operations.md): split them into several modules"
    );
    // Nothing was written: the key is free for another set of jobs.
    let small = DeploymentSpec {
        key: "big@1".to_owned(),
        module: "big".to_owned(),
        schema: schema_of("big", std::slice::from_ref(&one)),
        jobs: vec![one],
    };
    replica(&h, &small).await;
    assert!(h.next_execution("big", "big::v").await.is_some());
}
