//! What a user's tests do with cronverb (docs/testing.md): run a handler with a context of their
//! choosing, and check a job's schedule, with no runtime and no dependency beyond `cronverb`.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cronverb::chrono::{DateTime, TimeZone, Timelike, Utc};
use cronverb::{Context, Tz, cron};

/// What a handler reads from its state: the application's own handle, cheap to clone.
#[derive(Debug, Clone, Default)]
struct Outbox(Arc<Mutex<Vec<String>>>);

impl Outbox {
    fn sent(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Sends the invoices of the day before the run's scheduled instant.
#[cron("0 2 * * *", timezone = "Europe/Berlin", timeout = "10m")]
async fn send_invoices() -> Result<(), String> {
    let cx = cronverb::context();
    let outbox: Outbox = cx.state().ok_or("no outbox")?;
    let day = cx
        .scheduled_at()
        .date_naive()
        .pred_opt()
        .ok_or("no day before")?;
    outbox.0.lock().unwrap().push(format!(
        "{} of {}: the invoices of {day}",
        cx.verb(),
        cx.module()
    ));
    Ok(())
}

fn at(year: i32, month: u32, day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(year, month, day, hour, 0, 0).unwrap()
}

#[tokio::test]
async fn a_handler_runs_with_the_state_and_instant_the_test_gives_it() {
    let outbox = Outbox::default();
    let outcome = Context::for_test("testing::send_invoices")
        .scheduled_at(at(2026, 3, 9, 1))
        .state(outbox.clone())
        .run(send_invoices())
        .await;
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        outbox.sent(),
        ["testing::send_invoices of testing: the invoices of 2026-03-08"]
    );
}

#[tokio::test]
async fn a_handler_given_no_state_finds_none() {
    let outcome = Context::for_test("testing::send_invoices")
        .run(send_invoices())
        .await;
    assert_eq!(outcome, Err("no outbox".to_owned()));
}

#[tokio::test]
async fn a_test_context_has_defaults_for_what_the_test_does_not_set() {
    let before = Utc::now().with_nanosecond(0).unwrap();
    let cx = Context::for_test("reports::daily").build();
    assert_eq!(cx.verb(), "reports::daily");
    assert_eq!(cx.module(), "reports");
    assert_eq!(cx.run_id(), 0);
    assert_eq!(cx.scheduled_at().nanosecond(), 0);
    assert!(cx.scheduled_at() >= before && cx.scheduled_at() <= Utc::now());
    assert!(cx.state::<Outbox>().is_none());

    let cx = Context::for_test("heartbeat").build();
    assert_eq!(cx.module(), cronverb::DEFAULT_MODULE);

    let cx = Context::for_test("reports::daily")
        .module("audit")
        .run_id(42)
        .state(7_u32)
        .state(19_u32)
        .build();
    assert_eq!(
        (cx.module(), cx.run_id(), cx.state()),
        ("audit", 42, Some(19_u32))
    );
}

/// A handler whose future is made by code that reads the context first, as a closure given to
/// `RuntimeBuilder::job` may be.
struct ReadsTheContextWhenCalled;

impl IntoFuture for ReadsTheContextWhenCalled {
    type Output = i64;
    type IntoFuture = Pin<Box<dyn Future<Output = i64> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let run_id = cronverb::context().run_id();
        Box::pin(async move { run_id })
    }
}

#[tokio::test]
async fn the_context_is_set_while_the_handler_is_called_and_polled_but_not_in_tasks_it_spawns() {
    let run_id = Context::for_test("testing::called")
        .run_id(7)
        .run(ReadsTheContextWhenCalled)
        .await;
    assert_eq!(run_id, 7);

    let (own, spawned) = Context::for_test("testing::spawns")
        .run(async {
            let spawned = tokio::spawn(async { cronverb::try_context().is_some() });
            (cronverb::try_context().is_some(), spawned.await.unwrap())
        })
        .await;
    assert!(own);
    assert!(!spawned);
    assert!(cronverb::try_context().is_none());
}

#[test]
fn outside_a_run_the_panic_says_how_to_test_a_handler() {
    let panic = std::panic::catch_unwind(cronverb::context).expect_err("no context here");
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .expect("a text");
    assert_eq!(
        message,
        "`cronverb::context()` called outside a job handler run by the runtime; to test a handler, run it \
         with a context of your choosing: \
         `cronverb::Context::for_test(\"module::verb\").run(handler()).await` (docs/testing.md)"
    );
}

#[test]
fn a_jobs_schedule_lists_its_next_occurrences_in_its_zone() -> Result<(), cronverb::JobError> {
    let job = cronverb::job("testing::send_invoices").expect("declared with #[cron]");
    assert_eq!(job.timeout.as_deref(), Some("10m"));
    let schedule = job.schedule()?;
    assert_eq!(schedule.zone(), Tz::Europe__Berlin);
    assert_eq!(schedule.zone(), "Europe/Berlin".parse::<Tz>().unwrap());
    // 02:00 in Berlin is 01:00 UTC in winter. On 29 March 2026 the clocks skip from 02:00 to 03:00:
    // that day's run is at 03:00 local (01:00 UTC), then 02:00 local is 00:00 UTC.
    let next: Vec<DateTime<Utc>> = schedule.after(at(2026, 3, 27, 12)).take(3).collect();
    assert_eq!(
        next,
        [at(2026, 3, 28, 1), at(2026, 3, 29, 1), at(2026, 3, 30, 0)]
    );
    assert_eq!(
        schedule.next_after(at(2026, 3, 30, 0)),
        Some(at(2026, 3, 31, 0))
    );
    Ok(())
}

#[test]
fn an_unknown_job_is_none() {
    assert_eq!(cronverb::job("testing::no_such_job"), None);
}

#[tokio::test]
async fn a_job_added_to_a_runtime_has_a_schedule_once_built()
-> Result<(), Box<dyn std::error::Error>> {
    assert_eq!(cronverb::job("added::hourly"), None);
    cronverb::Runtime::builder()
        .registered_jobs(false)
        .job("added::hourly", "0 * * * *", || async {})
        .build()
        .await?;
    let schedule = cronverb::job("added::hourly")
        .expect("listed once built")
        .schedule()?;
    assert_eq!(schedule.zone(), Tz::UTC);
    assert_eq!(
        schedule.after(at(2026, 1, 1, 0)).next(),
        Some(at(2026, 1, 1, 1))
    );
    Ok(())
}
