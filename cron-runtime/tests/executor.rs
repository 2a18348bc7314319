//! The executor and the in-memory store on tokio's paused clock: every instant below is exact.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cron_runtime::store::{MemoryStore, Outcome, RunRecord};
use cron_runtime::{JobOptions, RuntimeBuilder, context};
use cron_schema::MissedPolicy;
use tokio::time::{Instant, sleep};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context as LayerContext, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

mod support;

use support::{runs_of, runtime_on};

/// The store's clock starts here, so a job firing every second first fires at `at(1)`.
fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

fn store() -> MemoryStore {
    MemoryStore::starting_at(at(0))
}

fn scheduled(runs: &[RunRecord]) -> Vec<DateTime<Utc>> {
    runs.iter().map(|r| r.scheduled_at).collect()
}

#[tokio::test(start_paused = true)]
async fn each_occurrence_runs_once_at_its_instant_with_its_context() {
    let store = store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in_job = Arc::clone(&seen);
    let clock = store.clone();
    let runtime = runtime_on(&store)
        .state(Arc::new(String::from("shared pool")))
        .job("test::tick", "* * * * * *", move || {
            let seen = Arc::clone(&seen_in_job);
            let clock = clock.clone();
            async move {
                let cx = context();
                let pool = cx.state::<Arc<String>>().expect("state is reachable");
                assert_eq!(*pool, "shared pool");
                assert_eq!(cx.state::<u8>(), None);
                seen.lock().unwrap().push((
                    cx.module().to_owned(),
                    cx.verb().to_owned(),
                    cx.scheduled_at(),
                    clock.now(),
                    cx.run_id(),
                ));
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(10_500)).await;
    handle.shutdown().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    let expected: Vec<_> = (1..=10).map(at).collect();
    assert_eq!(seen.iter().map(|s| s.2).collect::<Vec<_>>(), expected);
    for (module, verb, scheduled_at, started, _) in &seen {
        assert_eq!(module, "test");
        assert_eq!(verb, "test::tick");
        assert_eq!(
            started, scheduled_at,
            "a handler starts at its scheduled instant"
        );
    }
    let runs = runs_of(&store, "test::tick");
    assert_eq!(scheduled(&runs), expected);
    assert!(
        runs.iter()
            .all(|r| r.outcome == Some(Outcome::Succeeded) && r.skipped == 0)
    );
    let ids: Vec<i64> = runs.iter().map(|r| r.run_id).collect();
    assert_eq!(seen.iter().map(|s| s.4).collect::<Vec<_>>(), ids);
}

#[tokio::test(start_paused = true)]
async fn a_job_still_running_skips_its_later_occurrences_and_counts_them() {
    let store = store();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (running_in_job, most_in_job) = (Arc::clone(&running), Arc::clone(&most));
    let runtime = runtime_on(&store)
        .job("test::slow", "* * * * * *", move || {
            let (running, most) = (Arc::clone(&running_in_job), Arc::clone(&most_in_job));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                sleep(Duration::from_millis(3_500)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(10)).await;
    handle.shutdown().await.unwrap();

    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "a job never overlaps itself"
    );
    let runs = runs_of(&store, "test::slow");
    // Runs at 1 s end at 4.5 s: 2, 3 and 4 are skipped, the next is 5; and so on.
    assert_eq!(scheduled(&runs), vec![at(1), at(5), at(9)]);
    assert_eq!(
        runs.iter().map(|r| r.skipped).collect::<Vec<_>>(),
        vec![3, 3, 3]
    );
    assert_eq!(
        runs[0].finished_at,
        Some(at(4) + chrono::Duration::milliseconds(500))
    );
    assert!(runs.iter().all(|r| r.outcome == Some(Outcome::Succeeded)));
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_is_cancelled_and_recorded() {
    let store = store();
    let completed = Arc::new(AtomicBool::new(false));
    let completed_in_job = Arc::clone(&completed);
    let runtime = runtime_on(&store)
        .job_with(
            "test::stuck",
            "*/5 * * * * *",
            JobOptions::new().timeout(Duration::from_secs(2)),
            move || {
                let completed = Arc::clone(&completed_in_job);
                async move {
                    sleep(Duration::from_secs(10)).await;
                    completed.store(true, Ordering::SeqCst);
                }
            },
        )
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(11_000)).await;
    handle.shutdown().await.unwrap();

    let runs = runs_of(&store, "test::stuck");
    assert_eq!(scheduled(&runs), vec![at(5), at(10)]);
    let first = &runs[0];
    assert_eq!(first.outcome, Some(Outcome::TimedOut));
    assert_eq!(first.started_at, Some(at(5)));
    assert_eq!(first.finished_at, Some(at(7)), "cancelled at its timeout");
    assert!(
        first.error.as_deref().unwrap().contains("timed out"),
        "{first:?}"
    );
    sleep(Duration::from_secs(20)).await;
    assert!(
        !completed.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
}

/// A run claimed ahead of its instant whose handler starts late is recorded late: `started_at` is when
/// the handler was first polled (here the clock jumps past the instant before the executor wakes, as
/// when its thread is busy), not the instant it was claimed for; `claimed_at` is the claim's.
#[tokio::test(start_paused = true)]
async fn a_handler_started_late_is_recorded_late() {
    let store = store();
    let polled = Arc::new(Mutex::new(Vec::new()));
    let polled_in_job = Arc::clone(&polled);
    let clock = store.clone();
    let runtime = runtime_on(&store)
        .job("test::every10", "*/10 * * * * *", move || {
            let polled = Arc::clone(&polled_in_job);
            let clock = clock.clone();
            async move { polled.lock().unwrap().push(clock.now()) }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let origin = Instant::now();
    // 00:00:09.9: the 00:00:10 run is claimed (500 ms ahead) and waits for its instant.
    tokio::time::sleep_until(origin + Duration::from_millis(9_900)).await;
    assert!(polled.lock().unwrap().is_empty());
    // The clock jumps to 00:00:10.3 before the executor is polled again: its start is 300 ms late.
    tokio::time::advance(Duration::from_millis(400)).await;
    sleep(Duration::from_millis(1_000)).await;
    handle.shutdown().await.unwrap();

    let late = at(10) + chrono::Duration::milliseconds(300);
    assert_eq!(polled.lock().unwrap().clone(), vec![late]);
    let runs = runs_of(&store, "test::every10");
    assert_eq!(scheduled(&runs), vec![at(10)]);
    let run = &runs[0];
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(run.started_at, Some(late), "{run:?}");
    assert_eq!(
        run.claimed_at,
        at(10) - chrono::Duration::milliseconds(500),
        "claimed ahead: {run:?}"
    );
    assert_eq!(run.finished_at, Some(late));
}

#[tokio::test(start_paused = true)]
async fn a_panic_or_an_error_is_recorded_and_the_runtime_goes_on() {
    let store = store();
    let calls = Arc::new(AtomicUsize::new(0));
    let calls_in_job = Arc::clone(&calls);
    let runtime = runtime_on(&store)
        .job("test::flaky", "* * * * * *", move || {
            let call = calls_in_job.fetch_add(1, Ordering::SeqCst);
            async move {
                match call {
                    0 => panic!("the first run panics"),
                    1 => Err("the second run fails".to_owned()),
                    _ => Ok(()),
                }
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(3_500)).await;
    handle.shutdown().await.unwrap();

    let runs = runs_of(&store, "test::flaky");
    assert_eq!(scheduled(&runs), vec![at(1), at(2), at(3)]);
    let outcomes: Vec<_> = runs.iter().map(|r| r.outcome.unwrap()).collect();
    assert_eq!(
        outcomes,
        vec![Outcome::Panicked, Outcome::Failed, Outcome::Succeeded]
    );
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("the first run panics")
    );
    assert_eq!(runs[1].error.as_deref(), Some("the second run fails"));
    assert_eq!(runs[2].error, None);
}

/// Runs a job every minute, stops the runtime before its first run, stays down ten and a half minutes,
/// then starts again: the 00:01 occurrence is claimed 9.5 minutes late.
async fn stall(missed: MissedPolicy) -> (MemoryStore, Vec<DateTime<Utc>>) {
    let store = store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let build = |store: &MemoryStore| {
        let seen = Arc::clone(&seen);
        runtime_on(store).job_with(
            "test::minutely",
            "0 * * * * *",
            JobOptions::new().missed(missed),
            move || {
                let seen = Arc::clone(&seen);
                async move { seen.lock().unwrap().push(context().scheduled_at()) }
            },
        )
    };
    let first = build(&store).build().await.unwrap().start();
    sleep(Duration::from_millis(500)).await;
    first.shutdown().await.unwrap();
    assert_eq!(store.next_execution("test", "test::minutely"), Some(at(60)));

    sleep(Duration::from_secs(630)).await;
    let second = build(&store).build().await.unwrap().start();
    sleep(Duration::from_secs(40)).await; // until 00:11:10.5
    second.shutdown().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    (store, seen)
}

#[tokio::test(start_paused = true)]
async fn missed_once_runs_a_late_occurrence_once_and_counts_the_skipped_ones() {
    let (store, seen) = stall(MissedPolicy::Once).await;
    assert_eq!(seen, vec![at(60), at(660)]);
    let runs = runs_of(&store, "test::minutely");
    assert_eq!(scheduled(&runs), vec![at(60), at(660)]);
    let late = &runs[0];
    assert_eq!(late.outcome, Some(Outcome::Succeeded));
    assert_eq!(
        late.started_at,
        Some(at(630) + chrono::Duration::milliseconds(500))
    );
    // 00:02 … 00:10 never ran; the next run is 00:11.
    assert_eq!(late.skipped, 9);
    assert_eq!(runs[1].skipped, 0);
}

#[tokio::test(start_paused = true)]
async fn missed_skip_records_a_late_occurrence_skipped_and_counts_it() {
    let (store, seen) = stall(MissedPolicy::Skip).await;
    assert_eq!(seen, vec![at(660)], "the late occurrence is not run");
    let runs = runs_of(&store, "test::minutely");
    assert_eq!(scheduled(&runs), vec![at(60), at(660)]);
    let late = &runs[0];
    assert_eq!(late.outcome, Some(Outcome::Skipped));
    assert_eq!(late.started_at, None);
    // 00:01 … 00:10 never ran.
    assert_eq!(late.skipped, 10);
    assert_eq!(runs[1].outcome, Some(Outcome::Succeeded));
}

#[tokio::test(start_paused = true)]
async fn missed_all_runs_every_occurrence_in_its_window_one_at_a_time_oldest_first() {
    // docs/runtime.md, "Missed runs": down from 00:00:00.5 to 00:10:30.5, `catch_up = "5m"`, each run
    // taking ten seconds.
    let store = store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let build = |store: &MemoryStore| {
        let seen = Arc::clone(&seen);
        runtime_on(store).job_with(
            "test::minutely",
            "0 * * * * *",
            JobOptions::new()
                .missed(MissedPolicy::All)
                .catch_up(Duration::from_secs(300)),
            move || {
                let seen = Arc::clone(&seen);
                async move {
                    let started = Instant::now();
                    sleep(Duration::from_secs(10)).await;
                    seen.lock()
                        .unwrap()
                        .push((context().scheduled_at(), started, Instant::now()));
                }
            },
        )
    };
    let origin = Instant::now();
    let first = build(&store).build().await.unwrap().start();
    sleep(Duration::from_millis(500)).await;
    first.shutdown().await.unwrap();
    sleep(Duration::from_secs(630)).await;
    let second = build(&store).build().await.unwrap().start();
    sleep(Duration::from_secs(85)).await; // until 00:11:55.5
    second.shutdown().await.unwrap();

    let seen = seen.lock().unwrap().clone();
    let secs = |at: Instant| (at - origin).as_millis();
    let ran: Vec<(DateTime<Utc>, u128)> = seen
        .iter()
        .map(|(s, start, _)| (*s, secs(*start)))
        .collect();
    // 00:06 … 00:10, the window's, one after the other from 00:10:30.5; 00:11 at its end, 20 s late.
    assert_eq!(
        ran,
        vec![
            (at(360), 630_500),
            (at(420), 640_500),
            (at(480), 650_500),
            (at(540), 660_500),
            (at(600), 670_500),
            (at(660), 680_500),
        ]
    );
    // Never two at once: each started when the one before ended.
    for pair in seen.windows(2) {
        assert!(pair[1].1 >= pair[0].2, "{seen:?}");
    }
    let runs = runs_of(&store, "test::minutely");
    // 00:01 … 00:05 are older than the window: one `skipped` row counts them.
    let (skipped, succeeded): (Vec<_>, Vec<_>) = runs
        .iter()
        .partition(|r| r.outcome == Some(Outcome::Skipped));
    assert_eq!(
        skipped
            .iter()
            .map(|r| (r.scheduled_at, r.skipped))
            .collect::<Vec<_>>(),
        vec![(at(60), 5)]
    );
    assert_eq!(
        succeeded
            .iter()
            .map(|r| (r.scheduled_at, r.skipped))
            .collect::<Vec<_>>(),
        (6..=11).map(|m| (at(60 * m), 0)).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_within_the_tolerance_is_not_late() {
    let store = store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let build = |store: &MemoryStore| {
        let seen = Arc::clone(&seen);
        runtime_on(store).job_with(
            "test::minutely",
            "0 * * * * *",
            JobOptions::new().missed(MissedPolicy::Skip),
            move || {
                let seen = Arc::clone(&seen);
                async move { seen.lock().unwrap().push(context().scheduled_at()) }
            },
        )
    };
    let first = build(&store).build().await.unwrap().start();
    first.shutdown().await.unwrap();
    sleep(Duration::from_secs(110)).await; // 50 s after 00:01, the tolerance is 60 s
    let second = build(&store).build().await.unwrap().start();
    sleep(Duration::from_secs(1)).await;
    second.shutdown().await.unwrap();
    assert_eq!(seen.lock().unwrap().clone(), vec![at(60)]);
    let run = &runs_of(&store, "test::minutely")[0];
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(run.started_at, Some(at(110)));
    assert_eq!(run.skipped, 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_runs_finish_within_the_grace_period_and_cancels_the_rest() {
    let store = store();
    let slow_completed = Arc::new(AtomicBool::new(false));
    let slow_completed_in_job = Arc::clone(&slow_completed);
    let runtime = runtime_on(&store)
        .shutdown_grace(Duration::from_secs(10))
        .job("test::quick", "*/5 * * * * *", || async {
            sleep(Duration::from_secs(3)).await;
        })
        .job("test::slow", "*/5 * * * * *", move || {
            let completed = Arc::clone(&slow_completed_in_job);
            async move {
                sleep(Duration::from_secs(100)).await;
                completed.store(true, Ordering::SeqCst);
            }
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(6)).await;
    let asked = Instant::now();
    handle.shutdown().await.unwrap();
    assert_eq!(
        asked.elapsed(),
        Duration::from_secs(10),
        "waits out the grace period"
    );

    let quick = runs_of(&store, "test::quick");
    assert_eq!(
        scheduled(&quick),
        vec![at(5)],
        "no claim after shutdown began"
    );
    assert_eq!(quick[0].outcome, Some(Outcome::Succeeded));
    assert_eq!(quick[0].finished_at, Some(at(8)));
    let slow = runs_of(&store, "test::slow");
    assert_eq!(scheduled(&slow), vec![at(5)]);
    assert_eq!(slow[0].outcome, Some(Outcome::Cancelled));
    assert_eq!(slow[0].finished_at, Some(at(16)));
    // Released: idle again with its next occurrence, no lease to wait for.
    assert_eq!(store.next_execution("test", "test::slow"), Some(at(20)));
    sleep(Duration::from_secs(200)).await;
    assert!(!slow_completed.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_a_run_claimed_ahead_before_it_starts() {
    let store = store();
    let started = Arc::new(AtomicBool::new(false));
    let started_in_job = Arc::clone(&started);
    let runtime = runtime_on(&store)
        .claim_ahead(Duration::from_millis(500))
        .job("test::five", "*/5 * * * * *", move || {
            started_in_job.store(true, Ordering::SeqCst);
            async {}
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_millis(4_800)).await;
    assert_eq!(store.runs().len(), 1, "claimed ahead at 4.5 s");
    handle.shutdown().await.unwrap();
    assert!(!started.load(Ordering::SeqCst));
    assert!(store.runs().is_empty(), "the release leaves no run behind");
    assert_eq!(store.next_execution("test", "test::five"), Some(at(5)));
}

#[tokio::test(start_paused = true)]
async fn a_new_deployment_takes_over_without_repeating_or_dropping_an_occurrence() {
    let store = store();
    let job = |builder: RuntimeBuilder| builder.job("test::tick", "* * * * * *", || async {});
    let old = job(runtime_on(&store)).build().await.unwrap().start();
    sleep(Duration::from_millis(3_200)).await;
    let new = job(runtime_on(&store).deployment("test@2"))
        .build()
        .await
        .unwrap()
        .start();
    sleep(Duration::from_secs(3)).await;
    old.shutdown().await.unwrap();
    new.shutdown().await.unwrap();

    let runs = runs_of(&store, "test::tick");
    assert_eq!(scheduled(&runs), (1..=6).map(at).collect::<Vec<_>>());
    let deployments: Vec<i64> = runs.iter().map(|r| r.deployment_id).collect();
    assert_eq!(deployments[..3], [deployments[0]; 3]);
    assert_eq!(deployments[3..], [deployments[3]; 3]);
    assert_ne!(deployments[0], deployments[3]);
}

/// The fields of every `cron_run` span, as they were when the span closed.
#[derive(Clone, Default)]
struct RunSpans {
    open: Arc<Mutex<HashMap<u64, BTreeMap<String, String>>>>,
    closed: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for RunSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: LayerContext<'_, S>) {
        if attrs.metadata().name() == "cron_run" {
            let mut fields = BTreeMap::new();
            attrs.record(&mut Fields(&mut fields));
            self.open.lock().unwrap().insert(id.into_u64(), fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: LayerContext<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }

    fn on_close(&self, id: Id, _: LayerContext<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().remove(&id.into_u64()) {
            self.closed.lock().unwrap().push(fields);
        }
    }
}

/// docs/runtime.md, "Logs and traces": each run is a span with its module, verb, scheduled time, lateness, outcome and skipped
/// count, filled in by the time the run is recorded.
#[tokio::test(start_paused = true)]
async fn each_run_is_a_span_with_its_module_verb_instant_lateness_outcome_and_skipped_count() {
    let spans = RunSpans::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let store = store();
    let runtime = runtime_on(&store)
        .job("test::slow", "* * * * * *", || async {
            sleep(Duration::from_millis(2_500)).await;
        })
        .job("test::fails", "*/4 * * * * *", || async {
            Err::<(), _>("no invoices today")
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    sleep(Duration::from_secs(6)).await;
    handle.shutdown().await.unwrap();

    let closed = spans.closed.lock().unwrap().clone();
    let field = |span: &BTreeMap<String, String>, name: &str| span.get(name).cloned();
    let slow: Vec<_> = closed
        .iter()
        .filter(|s| field(s, "verb").as_deref() == Some("test::slow"))
        .collect();
    // Runs at 1 s (ends 3.5 s, skips 2 and 3) and at 4 s (ends 6.5 s, within the grace period).
    assert_eq!(slow.len(), 2, "{closed:#?}");
    let first = slow
        .iter()
        .find(|s| field(s, "scheduled_at") == Some(at(1).to_string()))
        .unwrap_or_else(|| panic!("the run at 1 s: {slow:#?}"));
    assert_eq!(field(first, "module").as_deref(), Some("test"));
    assert_eq!(field(first, "lateness_ms").as_deref(), Some("0"));
    assert_eq!(field(first, "outcome").as_deref(), Some("succeeded"));
    assert_eq!(field(first, "skipped").as_deref(), Some("2"));
    assert_eq!(field(first, "late").as_deref(), Some("false"));
    assert_eq!(field(first, "trigger").as_deref(), Some("regular"));
    assert!(field(first, "run_id").is_some());

    let failed = closed
        .iter()
        .find(|s| field(s, "verb").as_deref() == Some("test::fails"))
        .unwrap_or_else(|| panic!("a run of test::fails: {closed:#?}"));
    assert_eq!(field(failed, "scheduled_at"), Some(at(4).to_string()));
    assert_eq!(field(failed, "outcome").as_deref(), Some("failed"));
    assert_eq!(field(failed, "skipped").as_deref(), Some("0"));
}

/// On the real clock: a handler that blocks its thread ends on its first poll, and the run ends when it
/// returned, not when it started. (tokio's paused clock does not move while a thread sleeps.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_thread_ends_when_it_returns() {
    let store = MemoryStore::new();
    let runtime = runtime_on(&store)
        .job("test::blocking", "* * * * * *", || async {
            std::thread::sleep(Duration::from_millis(1_300));
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let first = loop {
        if let Some(run) = runs_of(&store, "test::blocking")
            .into_iter()
            .find(|r| r.finished_at.is_some())
        {
            break run;
        }
        sleep(Duration::from_millis(50)).await;
    };
    handle.shutdown().await.unwrap();

    let took = first.finished_at.unwrap() - first.started_at.unwrap();
    assert!(took >= chrono::Duration::milliseconds(1_300), "{first:?}");
    // It was still running one second after its occurrence: that occurrence is skipped.
    assert_eq!(first.skipped, 1, "{first:?}");
}
