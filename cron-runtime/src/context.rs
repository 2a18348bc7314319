//! What a handler knows about the run it is executing.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};

tokio::task_local! {
    static CONTEXT: Context;
}

/// The run a handler is executing: its module, verb, scheduled instant and id, and the runtime's state.
///
/// Get it with [`context()`] inside a handler. Cloning is cheap.
#[derive(Clone)]
pub struct Context {
    pub(crate) job: Arc<JobContext>,
    pub(crate) scheduled_at: DateTime<Utc>,
    pub(crate) run_id: i64,
}

/// What every run of one job shares. One reference per run rather than one per field: with thousands of
/// runs starting at once on several threads, each shared reference count is a contended cache line.
pub(crate) struct JobContext {
    pub(crate) module: Arc<str>,
    pub(crate) verb: Arc<str>,
    pub(crate) state: Arc<State>,
}

impl Context {
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

    /// The run's id in the store's history.
    pub fn run_id(&self) -> i64 {
        self.run_id
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
/// Outside a handler run by the runtime. See [`try_context`].
pub fn context() -> Context {
    try_context().expect("`cronverb::context()` called outside a job handler run by the runtime")
}

/// The context of the run the current task executes, or `None` outside a handler.
///
/// The context belongs to the handler's task: a task the handler spawns does not have it (pass it along).
pub fn try_context() -> Option<Context> {
    CONTEXT.try_with(Context::clone).ok()
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
