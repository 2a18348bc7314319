//! What a handler knows about the run it is executing, and how a test gives a handler one.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::IntoFuture;
use std::sync::Arc;

use chrono::{DateTime, SubsecRound, Utc};

tokio::task_local! {
    static CONTEXT: Context;
}

/// The run a handler is executing: its module, verb, scheduled instant and id, and the runtime's state.
///
/// Get it with [`context()`] inside a handler. Cloning is cheap. A test runs a handler with a context of
/// its choosing through [`Context::for_test`].
#[derive(Clone)]
pub struct Context {
    pub(crate) job: Arc<JobContext>,
    pub(crate) scheduled_at: DateTime<Utc>,
    pub(crate) run_id: i64,
    pub(crate) attempt: u32,
}

/// What every run of one job shares. One reference per run rather than one per field: with thousands of
/// runs starting at once on several threads, each shared reference count is a contended cache line.
pub(crate) struct JobContext {
    pub(crate) module: Arc<str>,
    pub(crate) verb: Arc<str>,
    pub(crate) state: Arc<State>,
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
    pub fn for_test(verb: impl Into<String>) -> TestContext {
        TestContext {
            verb: verb.into(),
            module: None,
            scheduled_at: None,
            run_id: 0,
            attempt: 1,
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
            .finish_non_exhaustive()
    }
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

/// A context a test chooses for a handler: its verb, module, scheduled instant, run id and state. Get one
/// with [`Context::for_test`], then [`run`](TestContext::run) the handler with it.
///
/// Every part not set has a default: the module is the verb's first `::`-separated segment (or
/// [`DEFAULT_MODULE`](crate::DEFAULT_MODULE) when it has none, as for a job added with
/// [`RuntimeBuilder::job`](crate::RuntimeBuilder::job)); the scheduled instant is the current time,
/// truncated to the second as the runtime's instants are; the run id is `0`, which no store gives;
/// there is no state.
pub struct TestContext {
    verb: String,
    module: Option<String>,
    scheduled_at: Option<DateTime<Utc>>,
    run_id: i64,
    attempt: u32,
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
            }),
            scheduled_at: self
                .scheduled_at
                .unwrap_or_else(|| Utc::now().trunc_subsecs(0)),
            run_id: self.run_id,
            attempt: self.attempt,
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
