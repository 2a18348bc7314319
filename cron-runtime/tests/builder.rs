//! Building a runtime: validation of jobs and settings, and the registry.

use std::time::Duration;

use cron_runtime::{BuildError, JobOptions, Runtime, jobs};
use cron_schema::{MissedPolicy, RunOn};
use support::Logs;

mod support;

#[tokio::test]
async fn two_jobs_with_one_name_fail_naming_both_locations() {
    let first_line = line!() + 4;
    let error = Runtime::builder()
        .registered_jobs(false)
        .module("test")
        .job("test::twice", "* * * * *", || async {})
        .job("test::twice", "0 * * * *", || async {})
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(error, BuildError::DuplicateJob { .. }),
        "{error:?}"
    );
    let file = file!();
    assert_eq!(
        error.to_string(),
        format!(
            "job `test::twice` is declared twice: at {file}:{first_line} and at {file}:{}",
            first_line + 1
        )
    );
}

#[tokio::test]
async fn an_invalid_expression_fails_naming_the_job_and_its_location() {
    let line = line!() + 4;
    let error = Runtime::builder()
        .registered_jobs(false)
        .module("test")
        .job("test::bad", "61 * * * *", || async {})
        .build()
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "job `test::bad` at {}:{line}: invalid expression `61 * * * *`: ",
            file!()
        )),
        "{message}"
    );
}

#[tokio::test]
async fn an_invalid_zone_or_timeout_fails() {
    let error = Runtime::builder()
        .registered_jobs(false)
        .job_with(
            "test::zone",
            "* * * * *",
            JobOptions::new().timezone("Europe/Berlln"),
            || async {},
        )
        .build()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Europe/Berlln"), "{error}");
    let error = Runtime::builder()
        .registered_jobs(false)
        .job_with(
            "test::zero",
            "* * * * *",
            JobOptions::new().timeout(Duration::ZERO),
            || async {},
        )
        .build()
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with("job `test::zero` at "),
        "{error}"
    );
}

/// The zones `#[cron]` refuses, the builder refuses with the same message (docs/expressions.md, "Names
/// a user may not mean"); a fixed offset on purpose is an `Etc` zone.
#[tokio::test]
async fn a_zone_a_user_may_not_mean_is_refused_with_the_zone_to_write() {
    let build = |zone: &'static str| async move {
        Runtime::builder()
            .registered_jobs(false)
            .job_with(
                "test::zone",
                "0 9 * * *",
                JobOptions::new().timezone(zone),
                || async {},
            )
            .build()
            .await
    };
    for (zone, instead) in [
        ("EST", "write `America/New_York`"),
        ("MST", "`America/Denver` or `America/Phoenix`"),
        ("HST", "write `Pacific/Honolulu`"),
        ("PST8PDT", "write `America/Los_Angeles`"),
        (
            "CET",
            "a city of the zone you mean, such as `Europe/Paris` or `Europe/Berlin`",
        ),
        ("WET", "`Europe/Lisbon`"),
    ] {
        let error = build(zone).await.unwrap_err().to_string();
        assert!(
            error.contains(&format!("time zone `{zone}` ")) && error.contains(instead),
            "{error}"
        );
    }
    let runtime = build("Etc/GMT+5").await.unwrap();
    let next = runtime.jobs()[0]
        .schedule()
        .unwrap()
        .next_after(chrono::DateTime::UNIX_EPOCH)
        .unwrap();
    // `Etc/GMT+5` is UTC−05:00: 09:00 there is 14:00 UTC.
    assert_eq!(next.to_rfc3339(), "1970-01-01T14:00:00+00:00");
}

/// A timeout beyond a year is refused, as `#[cron(timeout = "…")]` refuses it: `Duration::MAX` used to
/// build, and its first run panicked a worker adding it to an instant. The longest one runs.
#[tokio::test(start_paused = true)]
async fn a_timeout_beyond_a_year_is_refused_and_the_longest_runs() {
    for timeout in [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        cron_schema::MAX_DURATION + Duration::from_secs(1),
    ] {
        let error = Runtime::builder()
            .registered_jobs(false)
            .job_with(
                "test::long",
                "* * * * * *",
                JobOptions::new().timeout(timeout),
                || async {},
            )
            .build()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("is too long; it must be at most `8760h` (365 days)"),
            "{error}"
        );
    }
    // The runtime's own durations too: each is added to an instant somewhere.
    type Set = fn(cron_runtime::RuntimeBuilder) -> cron_runtime::RuntimeBuilder;
    let settings: [(&str, Set); 4] = [
        ("default_timeout", |b| b.default_timeout(Duration::MAX)),
        ("lease", |b| b.lease(Duration::MAX)),
        ("shutdown_grace", |b| b.shutdown_grace(Duration::MAX)),
        ("missed_run_tolerance", |b| {
            b.missed_run_tolerance(Duration::MAX)
        }),
    ];
    for (setting, set) in settings {
        let error = set(Runtime::builder().registered_jobs(false))
            .build()
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid runtime setting `{setting}`: must be at most 8760h (365 days)")
        );
    }

    // A tolerance shorter than the spread's grace would make late, and skip, the occurrences another
    // replica takes past it though no replica was down (docs/runtime.md, "How work is spread").
    let error = Runtime::builder()
        .registered_jobs(false)
        .missed_run_tolerance(Duration::from_millis(999))
        .build()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid runtime setting `missed_run_tolerance`: must be at least 1 s, twice the spread's \
         grace: another replica may take an occurrence 0.5 s after its start, and its run would be late"
    );

    let store = cron_runtime::store::MemoryStore::starting_at(chrono::DateTime::UNIX_EPOCH);
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&ran);
    let runtime = Runtime::builder()
        .registered_jobs(false)
        .memory_store(store.clone())
        .job_with(
            "test::longest",
            "* * * * * *",
            JobOptions::new().timeout(cron_schema::MAX_DURATION),
            move || {
                let counted = std::sync::Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    handle.shutdown().await.unwrap();
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(
        store
            .runs()
            .iter()
            .all(|run| run.outcome == Some(cron_runtime::store::Outcome::Succeeded)),
        "{:?}",
        store.runs()
    );
}

#[tokio::test]
async fn retries_backoff_and_on_follow_the_attributes_rules() {
    let refused = |options: JobOptions| async move {
        Runtime::builder()
            .registered_jobs(false)
            .job_with("test::retry", "* * * * *", options, || async {})
            .build()
            .await
            .unwrap_err()
            .to_string()
    };
    for (options, expected) in [
        (JobOptions::new().retries(101), "retries = 101 is too many"),
        (
            JobOptions::new()
                .retries(3)
                .backoff(Duration::from_millis(500)),
            "is out of range: a backoff is at least 1s and at most 1h",
        ),
        (
            JobOptions::new().backoff(Duration::from_secs(30)),
            "a backoff without retries does nothing",
        ),
        (
            JobOptions::new().retries(2).on(RunOn::EveryReplica),
            "cannot retry",
        ),
        (
            JobOptions::new()
                .missed(MissedPolicy::Skip)
                .on(RunOn::EveryReplica),
            "has no missed runs",
        ),
        (
            JobOptions::new().lease(Duration::from_millis(2_999)),
            "lease `2.999s` is out of range: a lease is at least 3s",
        ),
        (
            JobOptions::new().lease(Duration::from_secs(8761 * 3600)),
            "lease `8761h` is out of range",
        ),
        (
            JobOptions::new()
                .lease(Duration::from_secs(10))
                .on(RunOn::EveryReplica),
            "holds no lease",
        ),
    ] {
        let error = refused(options).await;
        assert!(error.starts_with("job `test::retry` at "), "{error}");
        assert!(error.contains(expected), "{error}");
    }

    Runtime::builder()
        .registered_jobs(false)
        .job_with(
            "test::retries",
            "* * * * *",
            JobOptions::new()
                .retries(3)
                .backoff(Duration::from_secs(90))
                .lease(Duration::from_secs(10)),
            || async {},
        )
        .job_with(
            "test::everywhere",
            "* * * * *",
            JobOptions::new().on(RunOn::EveryReplica),
            || async {},
        )
        .build()
        .await
        .unwrap();
    let listed = jobs();
    let retries = listed.iter().find(|j| j.name == "test::retries").unwrap();
    assert_eq!(
        (
            retries.retries,
            retries.backoff.as_deref(),
            retries.lease.as_deref(),
            retries.on
        ),
        (3, Some("1m30s"), Some("10s"), RunOn::OneReplica)
    );
    let everywhere = listed
        .iter()
        .find(|j| j.name == "test::everywhere")
        .unwrap();
    assert_eq!(
        (
            everywhere.retries,
            everywhere.backoff.as_deref(),
            everywhere.on
        ),
        (0, None, RunOn::EveryReplica)
    );
    let schema = cron_runtime::schema().to_string();
    assert!(
        schema.contains("+cron * * * * * retries=3 backoff=1m30s lease=10s\n"),
        "{schema}"
    );
    assert!(
        schema.contains("+cron * * * * * on=every_replica\n"),
        "{schema}"
    );
}

#[tokio::test]
async fn a_history_retention_beyond_a_century_or_zero_is_refused() {
    // The history's retention is subtracted from the store's clock: at most 36,500 days, as `cronverb
    // prune --older-than` takes, and not zero.
    let retention = |retention| {
        Runtime::builder()
            .registered_jobs(false)
            .history_retention(retention)
            .build()
    };
    for (too, message) in [
        (
            Duration::MAX,
            "must be at most 36500 days (about a century)",
        ),
        (
            cron_runtime::defaults::MAX_HISTORY_RETENTION + Duration::from_secs(1),
            "must be at most 36500 days (about a century)",
        ),
        (Duration::ZERO, "must be at least 1 s"),
    ] {
        assert_eq!(
            retention(too).await.unwrap_err().to_string(),
            format!("invalid runtime setting `history_retention`: {message}")
        );
    }
    assert!(
        retention(cron_runtime::defaults::MAX_HISTORY_RETENTION)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn out_of_range_settings_fail() {
    let error = Runtime::builder()
        .registered_jobs(false)
        .claim_ahead(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            BuildError::InvalidSetting {
                setting: "claim_ahead",
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_cap_of_zero_runs_is_refused() {
    let error = Runtime::builder()
        .registered_jobs(false)
        .max_concurrent_runs(0)
        .build()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid runtime setting `max_concurrent_runs`: must be at least 1; leave it unset for no cap"
    );
    // One is a cap.
    Runtime::builder()
        .registered_jobs(false)
        .max_concurrent_runs(1)
        .build()
        .await
        .unwrap();
}

#[tokio::test]
async fn built_jobs_are_listed_with_their_declaration() {
    let line = line!() + 4;
    let runtime = Runtime::builder()
        .registered_jobs(false)
        .module("listing")
        .job_with(
            "listing::nightly",
            "0 2 * * *",
            JobOptions::new().doc("Sends the nightly report."),
            || async { Ok::<(), std::io::Error>(()) },
        )
        .build()
        .await
        .unwrap();
    let listed = jobs();
    let job = listed
        .iter()
        .find(|j| j.name == "listing::nightly")
        .expect("listed");
    assert_eq!(job.expression, "0 2 * * *");
    assert_eq!(job.timezone, None);
    assert_eq!(job.file, file!());
    assert_eq!(job.line, line);
    assert_eq!(job.doc, "Sends the nightly report.");
    assert_eq!(runtime.jobs(), std::slice::from_ref(job));
    assert_eq!(runtime.module(), "listing");
    assert!(
        runtime.deployment().starts_with("listing+"),
        "{}",
        runtime.deployment()
    );
}

#[tokio::test]
async fn a_database_that_does_not_answer_is_an_error_that_hides_the_password() {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let error = Runtime::builder()
        .registered_jobs(false)
        .database_url("postgres://user:secret@127.0.0.1:1/db")
        .build()
        .await
        .expect_err("no server answers on port 1");
    let message = error.to_string();
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("secret"), "{message}");
}

#[tokio::test]
async fn the_default_module_is_the_one_the_jobs_belong_to() {
    let runtime = Runtime::builder()
        .registered_jobs(false)
        .job("reports::daily", "0 6 * * *", || async {})
        .job("reports::weekly", "0 6 * * 1", || async {})
        .build()
        .await
        .unwrap();
    assert_eq!(runtime.module(), "reports");

    let runtime = Runtime::builder()
        .registered_jobs(false)
        .build()
        .await
        .unwrap();
    assert_eq!(runtime.module(), cron_runtime::DEFAULT_MODULE);
}

#[tokio::test]
async fn jobs_of_several_modules_need_a_module_named() {
    let builder = || {
        Runtime::builder()
            .registered_jobs(false)
            .job("reports::daily", "0 6 * * *", || async {})
            .job("audit::sweep", "0 * * * *", || async {})
    };
    let error = builder().build().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the jobs belong to several modules (`audit` (`audit::sweep`), `reports` \
         (`reports::daily`)) and a runtime runs one: name it with `RuntimeBuilder::module`"
    );
    let runtime = builder().module("ops").build().await.unwrap();
    assert_eq!(runtime.module(), "ops");
}

#[tokio::test(flavor = "current_thread")]
async fn a_database_url_that_fails_never_shows_its_password_in_the_error_or_the_logs() {
    let logs = Logs::capture(tracing::Level::TRACE);
    for url in [
        // Each fails before any connection is tried.
        "postgres://postgres@127.0.0.1:5432/db?password=S3cretPW&sslmode=bogus",
        "postgres://postgres@127.0.0.1:5432/db?sslpassword=S3cretPW&sslmode=bogus",
        "postgres://app:S3cretPW@127.0.0.1:5432/db?sslmode=bogus",
        "host=127.0.0.1 user=postgres password=S3cretPW dbname=db",
        "host=127.0.0.1 password='S3cret PW' dbname=db",
    ] {
        let error = Runtime::builder()
            .registered_jobs(false)
            .module("test")
            .database_url(url)
            .job("test::tick", "* * * * *", || async {})
            .build()
            .await
            .err()
            .unwrap_or_else(|| panic!("`{url}` is refused"));
        let message = error.to_string();
        assert!(!message.contains("S3cret"), "{message}");
        assert!(message.contains("***"), "{message}");
        assert!(!format!("{error:?}").contains("S3cret"), "{error:?}");
    }
    let logs = logs.text();
    assert!(!logs.contains("S3cret"), "{logs}");
}

#[tokio::test]
async fn more_jobs_than_a_deployment_may_have_are_refused_before_they_are_validated() {
    let mut builder = Runtime::builder().registered_jobs(false).module("big");
    for i in 0..=100_000 {
        // Invalid on purpose: the count is refused before any job is looked at.
        builder = builder.job(format!("big::v{i}"), "61 * * * *", || async {});
    }
    let error = builder.build().await.unwrap_err();
    assert!(matches!(error, BuildError::TooManyJobs(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "this runtime has 100001 jobs, more than the 100000 a deployment may have \
         (docs/operations.md): split them into several modules"
    );
}

#[tokio::test]
async fn a_runtime_whose_key_is_registered_with_other_jobs_stops_with_an_error() {
    let store = cron_runtime::store::MemoryStore::new();
    let first = Runtime::builder()
        .registered_jobs(false)
        .module("rtapp")
        .deployment("rtapp@1")
        .memory_store(store.clone())
        .job("rtapp::a", "0 * * * *", || async {})
        .build()
        .await
        .unwrap()
        .start();
    let other = Runtime::builder()
        .registered_jobs(false)
        .module("rtapp")
        .deployment("rtapp@1")
        .memory_store(store.clone())
        .job("rtapp::b", "0 * * * *", || async {})
        .build()
        .await
        .unwrap()
        .start();
    // It stops by itself instead of retrying.
    let stopped = tokio::time::timeout(Duration::from_secs(10), async {
        while !other.is_finished() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "the second runtime is still running");
    let error = other.shutdown().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "while registering deployment `rtapp@1`: deployment `rtapp@1` is registered with other \
         jobs: this schema adds 1 verb (`rtapp::b`), removes 1 (`rtapp::a`); a deployment key is \
         one set of jobs: give this version its own key, such as its version number or commit \
         (docs/operations.md)"
    );
    first.shutdown().await.unwrap();
}
