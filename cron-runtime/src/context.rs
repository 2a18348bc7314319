//! What a handler knows about the run it is executing, and how a test gives a handler one
//! (docs/runtime.md, "What a handler knows").

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::IntoFuture;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use cron_schema::MissedPolicy;

use crate::store::{Claim, Store, StoreError};

tokio::task_local! {
    static CONTEXT: Context;
}

/// The run a handler is executing: its module, verb, scheduled instant and id, what started it, the key
/// of its occurrence, and the runtime's state.
///
/// Get it with [`context()`] inside a handler. Cloning is cheap. A test runs a handler with a context of
/// its choosing through [`Context::for_test`].
#[derive(Clone)]
pub struct Context {
    pub(crate) job: Arc<JobContext>,
    pub(crate) scheduled_at: DateTime<Utc>,
    pub(crate) run_id: i64,
    pub(crate) attempt: u32,
    pub(crate) trigger: Trigger,
    /// Where an operator's request to cancel the run arrives ([`Context::cancelled`]); `None` for a
    /// run no one can cancel (a job on every replica, a test's).
    pub(crate) cancel: Option<Arc<dyn Cancellable>>,
}

/// An operator's request to stop a run in flight (`cronverb cancel`; docs/operations.md, "Cancelling
/// a run"): set once by the executor that runs it, read by its handler through [`Context::cancelled`]
/// and by the executor, which drops the handler after a grace period.
#[derive(Debug, Default)]
pub(crate) struct Cancellation {
    /// The run's error once it ends (`cancelled by ACTOR: NOTE`); set once.
    error: OnceLock<String>,
    requested: tokio::sync::Notify,
}

impl Cancellation {
    /// Requests the run to stop, ending with `error`; `false` if it was requested already.
    pub(crate) fn request(&self, error: String) -> bool {
        let first = self.error.set(error).is_ok();
        if first {
            self.requested.notify_waiters();
        }
        first
    }

    /// The error of a run requested to stop.
    pub(crate) fn error(&self) -> Option<&str> {
        self.error.get().map(String::as_str)
    }

    /// Resolves once the run is requested to stop.
    pub(crate) async fn requested(&self) {
        loop {
            let notified = self.requested.notified();
            tokio::pin!(notified);
            // Registered before the check, so that a request between the two is not missed.
            notified.as_mut().enable();
            if self.error.get().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// What holds a run's [`Cancellation`]: the executor's state of the run, shared with its context
/// without a second allocation per run.
pub(crate) trait Cancellable: Send + Sync {
    fn cancellation(&self) -> &Cancellation;
}

/// What every run of one job shares. One reference per run rather than one per field: with thousands of
/// runs starting at once on several threads, each shared reference count is a contended cache line.
pub(crate) struct JobContext {
    pub(crate) module: Arc<str>,
    pub(crate) verb: Arc<str>,
    pub(crate) state: Arc<State>,
    /// Where [`Context::previous_success`] asks.
    pub(crate) history: History,
}

/// Where [`Context::previous_success`] finds its answer.
pub(crate) enum History {
    /// The store that records the job's runs, asked only when a handler calls.
    Store(Arc<dyn Successes>),
    /// No history: a job on every replica, whose runs are not in the store (docs/runtime.md, "Jobs on
    /// every replica").
    None,
    /// The answer a test chose ([`TestContext::previous_success`]).
    Given(Option<DateTime<Utc>>),
}

/// What [`Successes::previous_success`] gives: the store's answer, to await.
type PreviousSuccess<'a> =
    Pin<Box<dyn Future<Output = Result<Option<DateTime<Utc>>, StoreError>> + Send + 'a>>;

/// The store's side of [`Context::previous_success`], for a context that names no store type:
/// [`Store::previous_success`] boxed.
pub(crate) trait Successes: Send + Sync {
    fn previous_success<'a>(
        &'a self,
        module: &'a str,
        verb: &'a str,
        before: DateTime<Utc>,
    ) -> PreviousSuccess<'a>;
}

impl<S: Store> Successes for S {
    fn previous_success<'a>(
        &'a self,
        module: &'a str,
        verb: &'a str,
        before: DateTime<Utc>,
    ) -> PreviousSuccess<'a> {
        Box::pin(Store::previous_success(self, module, verb, before))
    }
}

/// What started a run (docs/runtime.md, "What a handler knows"): its [`Context::trigger`].
///
/// Written in logs and reports as its [`Display`](fmt::Display): `regular`, `late`, `catch_up`,
/// `backfill`, `manual`, `retry`. More kinds may come: match with a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Trigger {
    /// Its scheduled occurrence, started on time: claimed within the missed-run tolerance.
    Regular,
    /// Its scheduled occurrence, claimed more than the missed-run tolerance after its instant (every
    /// replica was down, frozen or busy) by a job under `missed = "once"`, which runs the oldest
    /// missed occurrence once (docs/runtime.md, "Missed runs"). A job on every replica's run is late
    /// when its replica started it more than the tolerance after its instant.
    Late,
    /// One of the missed occurrences a job under `missed = "all"` runs one after the other after
    /// downtime, oldest first, each late (docs/runtime.md, "Missed runs").
    CatchUp,
    /// An occurrence an operator queued with `cronverb backfill` (docs/operations.md, "Backfill").
    Backfill,
    /// A run an operator asked for with `cronverb trigger`, scheduled at the trigger's instant
    /// (docs/operations.md, "Manual runs").
    Manual,
    /// A second attempt of its occurrence, or a later one, of a job with `retries` (docs/runtime.md,
    /// "Retries"): [`Context::attempt`] is 2 or more.
    Retry,
}

impl Trigger {
    /// Its name in logs and reports: `regular`, `late`, `catch_up`, `backfill`, `manual`, `retry`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Regular => "regular",
            Trigger::Late => "late",
            Trigger::CatchUp => "catch_up",
            Trigger::Backfill => "backfill",
            Trigger::Manual => "manual",
            Trigger::Retry => "retry",
        }
    }

    /// What started the run of `claim`, of a job under the missed-run policy `missed`: from the facts
    /// every store reports alike on a claim ([`Claim::retry_at`], [`Claim::backfill`],
    /// [`Claim::manual`], [`Claim::late`]).
    pub(crate) fn of(claim: &Claim, missed: MissedPolicy) -> Trigger {
        if claim.retry_at.is_some() {
            Trigger::Retry
        } else if claim.backfill {
            Trigger::Backfill
        } else if claim.manual {
            Trigger::Manual
        } else if claim.late {
            match missed {
                MissedPolicy::All => Trigger::CatchUp,
                // `skip` records a late occurrence skipped: no handler sees it.
                _ => Trigger::Late,
            }
        } else {
            Trigger::Regular
        }
    }

    /// Whether the run was claimed late ([`Claim::late`]): what it skips was missed, not overlapped.
    pub(crate) fn late(self) -> bool {
        matches!(self, Trigger::Late | Trigger::CatchUp)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Context {
    /// A context for running the handler of `verb` in a test, without a runtime: set what the handler
    /// reads, then [`run`](TestContext::run) it. Nothing is claimed, recorded or timed out; the handler
    /// is polled by the test's own task until it ends.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use cron_runtime::Context;
    /// use cron_runtime::chrono::{TimeZone, Utc};
    ///
    /// async fn send_invoices() -> Result<(), String> {
    ///     let cx = cron_runtime::context();
    ///     let rate: u32 = cx.state().ok_or("no rate")?;
    ///     println!("invoicing at {rate} for the run of {}", cx.scheduled_at());
    ///     Ok(())
    /// }
    ///
    /// let at = Utc.with_ymd_and_hms(2026, 3, 9, 1, 0, 0).unwrap();
    /// let result = Context::for_test("billing::send_invoices")
    ///     .scheduled_at(at)
    ///     .state(19_u32)
    ///     .run(send_invoices())
    ///     .await;
    /// assert_eq!(result, Ok(()));
    /// # }
    /// ```
    ///
    /// What started the run and the previous success are set the same way; the occurrence key follows
    /// from the module, the verb and the scheduled instant:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use cron_runtime::chrono::{TimeDelta, TimeZone, Utc};
    /// use cron_runtime::{Context, StoreError, Trigger};
    ///
    /// /// Exports the rows changed since the last export that succeeded.
    /// async fn export() -> Result<String, StoreError> {
    ///     let cx = cron_runtime::context();
    ///     // The first run, with no success before it, takes the day before its instant.
    ///     let since = cx
    ///         .previous_success()
    ///         .await?
    ///         .unwrap_or(cx.scheduled_at() - TimeDelta::days(1));
    ///     Ok(format!(
    ///         "{} run, rows from {since} to {}, key {}",
    ///         cx.trigger(),
    ///         cx.scheduled_at(),
    ///         cx.occurrence_key()
    ///     ))
    /// }
    ///
    /// let at = Utc.with_ymd_and_hms(2026, 3, 9, 1, 0, 0).unwrap();
    /// let exported = Context::for_test("reports::export")
    ///     .scheduled_at(at)
    ///     .trigger(Trigger::CatchUp)
    ///     .previous_success(Some(Utc.with_ymd_and_hms(2026, 3, 8, 23, 0, 0).unwrap()))
    ///     .run(export())
    ///     .await;
    /// assert_eq!(
    ///     exported.unwrap(),
    ///     "catch_up run, rows from 2026-03-08 23:00:00 UTC to 2026-03-09 01:00:00 UTC, \
    ///      key reports/reports::export@2026-03-09T01:00:00Z"
    /// );
    /// # }
    /// ```
    pub fn for_test(verb: impl Into<String>) -> TestContext {
        TestContext {
            verb: verb.into(),
            module: None,
            scheduled_at: None,
            run_id: 0,
            attempt: 1,
            trigger: Trigger::Regular,
            previous_success: None,
            state: State::default(),
        }
    }

    /// The module of the running deployment (`billing`).
    pub fn module(&self) -> &str {
        &self.job.module
    }

    /// The verb name of the job (`billing::send_invoices`).
    pub fn verb(&self) -> &str {
        &self.job.verb
    }

    /// The occurrence this run executes. The handler starts at this instant, or as soon as it can when the
    /// run is late.
    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.scheduled_at
    }

    /// The run's id in the store's history; 0 for a job on every replica, whose runs are not in it
    /// (docs/runtime.md, "Jobs on every replica").
    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// Which attempt of its occurrence this run is: 1, then 2 and on for the retries of a job that
    /// retries (docs/runtime.md, "Retries"). The scheduled instant and the run id stay the same across
    /// attempts.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// What started this run: its occurrence on time or late, a catch-up, a backfill, a manual run or
    /// a retry (docs/runtime.md, "What a handler knows").
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }

    /// Resolves when an operator cancels this run (`cronverb cancel`, `Admin::cancel`, the dashboard;
    /// docs/operations.md, "Cancelling a run"), as tokio-util's `CancellationToken::cancelled` does:
    /// the handler stops what it is doing and returns. A handler that has not returned within the
    /// shutdown grace period after the request ([`RuntimeBuilder::shutdown_grace`], 30 s by default)
    /// is dropped at its next `.await`. The run is recorded `cancelled`, with who cancelled it, and its
    /// occurrence is not tried again, whatever the handler returned.
    ///
    /// Never resolves for a run no one can cancel: a job on every replica, or a test's context.
    /// The future owns what it needs, so that it can outlive this `Context` (in a `select!`).
    ///
    /// ```no_run
    /// # async fn export_batch() -> bool { false }
    /// async fn export() -> Result<(), String> {
    ///     let context = cron_runtime::context();
    ///     let cancelled = context.cancelled();
    ///     tokio::pin!(cancelled);
    ///     loop {
    ///         tokio::select! {
    ///             () = &mut cancelled => return Ok(()),
    ///             more = export_batch() => if !more { return Ok(()) },
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// [`RuntimeBuilder::shutdown_grace`]: crate::RuntimeBuilder::shutdown_grace
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let cancel = self.cancel.clone();
        async move {
            match cancel {
                Some(cancel) => cancel.cancellation().requested().await,
                None => std::future::pending().await,
            }
        }
    }

    /// Whether an operator has cancelled this run ([`Context::cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|cancel| cancel.cancellation().error().is_some())
    }

    /// The key of the occurrence this run executes, to pass to a downstream API as its idempotency key
    /// (Stripe's `Idempotency-Key`, a unique constraint of your own): the same for every attempt of
    /// the occurrence, on every replica, across restarts and releases, and different for every other
    /// occurrence. A downstream call repeated by a retry, or by a replica that took over a run whose
    /// first replica froze mid-call, is then recognized as the same call (docs/runtime.md, "What a
    /// handler knows").
    ///
    /// It is `{module}/{verb}@{scheduled_at}`, the instant in RFC 3339 in UTC with `Z`, in whole seconds
    /// unless it has a fraction (a manual run's, at the trigger's instant), which is then written in
    /// milliseconds (or finer, when it has finer): `billing/billing::send_invoices@2026-03-09T01:00:00Z`.
    /// It names only what the code fixes, the module (the crate, or [`RuntimeBuilder::module`]) and the
    /// verb, never the deployment key, so a deploy does not change it. A manual run and a backfill
    /// have their own instants, so their own keys.
    ///
    /// [`RuntimeBuilder::module`]: crate::RuntimeBuilder::module
    pub fn occurrence_key(&self) -> String {
        occurrence_key(&self.job.module, &self.job.verb, self.scheduled_at)
    }

    /// The scheduled instant of the job's last occurrence that succeeded before this run's: the latest
    /// run of this verb of this module, under any deployment, recorded `succeeded` and scheduled
    /// strictly before [`scheduled_at`](Self::scheduled_at) (a manual run and a backfill count, at their
    /// own instants); `None` when there is none. For incremental work: process what came since the
    /// last success, up to this occurrence. Every attempt of an occurrence gets the same answer, unless a
    /// run of an earlier instant succeeded in between.
    ///
    /// The store is asked when this is called, and only then (one indexed read of the history: nothing
    /// is read for runs that do not ask). It sees what the history keeps (docs/runtime.md, "History
    /// retention": the in-memory store keeps the last runs only). A job on every replica has no history
    /// in the store: `Ok(None)`. An error is the store's, which the handler may return or retry.
    pub async fn previous_success(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        match &self.job.history {
            History::Store(store) => {
                store
                    .previous_success(&self.job.module, &self.job.verb, self.scheduled_at)
                    .await
            }
            History::None => Ok(None),
            History::Given(at) => Ok(*at),
        }
    }

    /// A clone of the value of type `T` given to
    /// [`RuntimeBuilder::state`](crate::RuntimeBuilder::state), or `None` when none was.
    ///
    /// Values are cloned on each call: store handles that are cheap to clone (a connection pool, an
    /// `Arc<…>`).
    pub fn state<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.job.state.get::<T>()
    }

    pub(crate) fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        CONTEXT.scope(self, future)
    }

    /// Runs `f` with this context set: for polling a handler outside a task of its own.
    pub(crate) fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        CONTEXT.sync_scope(self, f)
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("module", &self.job.module)
            .field("verb", &self.job.verb)
            .field("scheduled_at", &self.scheduled_at)
            .field("run_id", &self.run_id)
            .field("attempt", &self.attempt)
            .field("trigger", &self.trigger)
            .finish_non_exhaustive()
    }
}

/// [`Context::occurrence_key`]: `{module}/{verb}@{instant}`, the instant in RFC 3339 in UTC with `Z`,
/// with a fraction only when it has one (in milliseconds, or finer when it has finer).
fn occurrence_key(module: &str, verb: &str, scheduled_at: DateTime<Utc>) -> String {
    format!(
        "{module}/{verb}@{}",
        scheduled_at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    )
}

/// The context of the run the current task executes.
///
/// # Panics
///
/// Outside a handler run by the runtime or by [`TestContext::run`], at the caller's line. See
/// [`try_context`].
#[track_caller]
pub fn context() -> Context {
    try_context().expect(OUTSIDE_A_RUN)
}

/// What [`context()`] panics with outside a run: where a context comes from, and how a test gives one.
const OUTSIDE_A_RUN: &str = "`cronverb::context()` called outside a job handler run by the runtime; \
     to test a handler, run it with a context of your choosing: \
     `cronverb::Context::for_test(\"module::verb\").run(handler()).await` (docs/testing.md)";

/// The context of the run the current task executes, or `None` outside a handler.
///
/// The context belongs to the handler's task: a task the handler spawns does not have it (pass it along).
pub fn try_context() -> Option<Context> {
    CONTEXT.try_with(Context::clone).ok()
}

/// A context a test chooses for a handler: its verb, module, scheduled instant, run id, attempt, trigger,
/// previous success and state. Get one with [`Context::for_test`], then [`run`](TestContext::run) the
/// handler with it.
///
/// Every part not set has a default: the module is the verb's first `::`-separated segment (or
/// [`DEFAULT_MODULE`](crate::DEFAULT_MODULE) when it has none, as for a job added with
/// [`RuntimeBuilder::job`](crate::RuntimeBuilder::job)); the scheduled instant is the current time,
/// truncated to the second as the runtime's instants are; the run id is `0`, which no store gives; the
/// attempt is 1; the trigger is [`Trigger::Regular`]; there is no previous success and no state. The
/// occurrence key follows from the module, the verb and the scheduled instant.
pub struct TestContext {
    verb: String,
    module: Option<String>,
    scheduled_at: Option<DateTime<Utc>>,
    run_id: i64,
    attempt: u32,
    trigger: Trigger,
    previous_success: Option<DateTime<Utc>>,
    state: State,
}

impl TestContext {
    /// The module [`Context::module`] returns.
    pub fn module(mut self, module: impl Into<String>) -> TestContext {
        self.module = Some(module.into());
        self
    }

    /// The occurrence [`Context::scheduled_at`] returns.
    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> TestContext {
        self.scheduled_at = Some(at);
        self
    }

    /// The id [`Context::run_id`] returns.
    pub fn run_id(mut self, id: i64) -> TestContext {
        self.run_id = id;
        self
    }

    /// The attempt [`Context::attempt`] returns (default 1).
    pub fn attempt(mut self, attempt: u32) -> TestContext {
        self.attempt = attempt;
        self
    }

    /// What [`Context::trigger`] returns (default [`Trigger::Regular`]). It sets nothing else: a test
    /// of a retry sets [`attempt`](Self::attempt) too.
    pub fn trigger(mut self, trigger: Trigger) -> TestContext {
        self.trigger = trigger;
        self
    }

    /// What [`Context::previous_success`] answers (default `None`: no earlier success).
    pub fn previous_success(mut self, at: Option<DateTime<Utc>>) -> TestContext {
        self.previous_success = at;
        self
    }

    /// A value [`Context::state`] returns, one per type, as
    /// [`RuntimeBuilder::state`](crate::RuntimeBuilder::state) gives it: a second value of the same type
    /// replaces the first.
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> TestContext {
        self.state.insert(value);
        self
    }

    /// The context, for code that takes one as an argument (a task a handler spawns gets its context
    /// passed along).
    pub fn build(self) -> Context {
        let module = self
            .module
            .unwrap_or_else(|| crate::schema::module_of_job(&self.verb, None).to_owned());
        Context {
            job: Arc::new(JobContext {
                module: module.into(),
                verb: self.verb.into(),
                state: Arc::new(self.state),
                history: History::Given(self.previous_success),
            }),
            scheduled_at: self
                .scheduled_at
                .unwrap_or_else(|| Utc::now().trunc_subsecs(0)),
            run_id: self.run_id,
            attempt: self.attempt,
            trigger: self.trigger,
            cancel: None,
        }
    }

    /// Runs `handler` with this context, as the runtime runs a handler: [`context()`] returns it while
    /// `handler` is turned into a future and while that future is polled, and a task the handler spawns
    /// does not have it. Gives what the handler returns.
    ///
    /// Unlike the runtime, it sets no timeout and does not catch a panic: the panic fails the test.
    pub async fn run<F: IntoFuture>(self, handler: F) -> F::Output {
        let context = self.build();
        let future = context.clone().sync_scope(|| handler.into_future());
        context.scope(future).await
    }
}

impl fmt::Debug for TestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestContext")
            .field("verb", &self.verb)
            .field("module", &self.module)
            .field("scheduled_at", &self.scheduled_at)
            .field("run_id", &self.run_id)
            .field("attempt", &self.attempt)
            .field("trigger", &self.trigger)
            .field("previous_success", &self.previous_success)
            .field("state", &self.state)
            .finish()
    }
}

/// Typed values handlers reach through [`Context::state`], one per type.
#[derive(Default)]
pub(crate) struct State {
    values: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
}

impl State {
    pub(crate) fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Box::new(value));
    }

    fn get<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
            .cloned()
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("values", &self.values.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};

    use super::*;
    use crate::store::ClaimAction;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 9, 1, 0, 0).unwrap()
    }

    #[test]
    fn the_occurrence_key_is_module_verb_and_instant_in_rfc_3339_utc() {
        // Pinned: a key handed to a downstream API must read the same in every release.
        let key = |at| occurrence_key("billing", "billing::send_invoices", at);
        assert_eq!(
            key(at()),
            "billing/billing::send_invoices@2026-03-09T01:00:00Z"
        );
        // A fraction only when there is one: milliseconds, or finer when the instant is finer.
        assert_eq!(
            key(at() + TimeDelta::milliseconds(250)),
            "billing/billing::send_invoices@2026-03-09T01:00:00.250Z"
        );
        assert_eq!(
            key(at() + TimeDelta::microseconds(250_001)),
            "billing/billing::send_invoices@2026-03-09T01:00:00.250001Z"
        );
        // Another zone's instant is written in UTC.
        let berlin = chrono_tz::Europe::Berlin
            .with_ymd_and_hms(2026, 3, 9, 2, 0, 0)
            .unwrap();
        assert_eq!(key(berlin.with_timezone(&Utc)), key(at()));
    }

    #[test]
    fn a_test_context_derives_its_key_from_its_module_verb_and_instant() {
        let cx = Context::for_test("send_invoices")
            .module("billing")
            .scheduled_at(at())
            .attempt(3)
            .build();
        assert_eq!(
            cx.occurrence_key(),
            "billing/send_invoices@2026-03-09T01:00:00Z"
        );
        // The attempt, the run id and the trigger are not in it.
        let retry = Context::for_test("send_invoices")
            .module("billing")
            .scheduled_at(at())
            .run_id(7)
            .trigger(Trigger::Retry)
            .build();
        assert_eq!(retry.occurrence_key(), cx.occurrence_key());
        let other = Context::for_test("send_invoices")
            .module("billing")
            .scheduled_at(at() + TimeDelta::seconds(1))
            .build();
        assert_ne!(other.occurrence_key(), cx.occurrence_key());
    }

    #[test]
    fn a_trigger_is_written_in_snake_case() {
        let written: Vec<String> = [
            Trigger::Regular,
            Trigger::Late,
            Trigger::CatchUp,
            Trigger::Backfill,
            Trigger::Manual,
            Trigger::Retry,
        ]
        .iter()
        .map(Trigger::to_string)
        .collect();
        assert_eq!(
            written,
            ["regular", "late", "catch_up", "backfill", "manual", "retry"]
        );
    }

    fn claim() -> Claim {
        Claim {
            run_id: 1,
            job_id: 1,
            verb: "billing::send_invoices".to_owned(),
            scheduled_at: at(),
            late: false,
            action: ClaimAction::Run,
            skipped: 0,
            lease_expires_at: at(),
            attempt: 1,
            retry_at: None,
            backfill: false,
            manual: false,
            jitter_offset: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn a_claim_says_what_started_its_run() {
        let late = Claim {
            late: true,
            ..claim()
        };
        let cases = [
            (claim(), MissedPolicy::Once, Trigger::Regular),
            (claim(), MissedPolicy::All, Trigger::Regular),
            (late.clone(), MissedPolicy::Once, Trigger::Late),
            (late.clone(), MissedPolicy::All, Trigger::CatchUp),
            (
                Claim {
                    manual: true,
                    ..claim()
                },
                MissedPolicy::All,
                Trigger::Manual,
            ),
            (
                Claim {
                    manual: true,
                    backfill: true,
                    ..claim()
                },
                MissedPolicy::Once,
                Trigger::Backfill,
            ),
            (
                Claim {
                    attempt: 2,
                    retry_at: Some(at() + TimeDelta::seconds(30)),
                    ..claim()
                },
                MissedPolicy::All,
                Trigger::Retry,
            ),
        ];
        for (claim, missed, trigger) in cases {
            assert_eq!(Trigger::of(&claim, missed), trigger, "{claim:?} {missed}");
        }
    }

    #[tokio::test]
    async fn a_test_context_answers_the_previous_success_it_was_given() {
        let cx = Context::for_test("billing::send_invoices").build();
        assert_eq!(cx.previous_success().await.unwrap(), None);
        assert_eq!(cx.trigger(), Trigger::Regular);
        let earlier = at() - TimeDelta::hours(1);
        let cx = Context::for_test("billing::send_invoices")
            .previous_success(Some(earlier))
            .build();
        assert_eq!(cx.previous_success().await.unwrap(), Some(earlier));
    }
}
