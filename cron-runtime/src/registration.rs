//! What the `#[cron]` attribute submits to the registry at link time.

use std::future::Future;
use std::pin::Pin;

use cron_schema::{MissedPolicy, RunOn};

/// The future a handler returns, with its outcome already turned into a message on failure.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>>;

/// One `#[cron]` function, as the attribute registers it with `inventory`.
///
/// Not public API: the attribute builds it, the registry reads it. Every field was validated at compile
/// time through `cron-schema`; the runtime validates again with the same code (a registration may come
/// from an older build of the attribute).
#[derive(Debug)]
#[doc(hidden)]
pub struct Registration {
    /// `name = "…"`, or `module_path!()::fn_name`.
    pub name: &'static str,
    /// `module_path!()` of the function (the default `name` starts with it).
    pub module_path: &'static str,
    /// The expression exactly as written.
    pub expression: &'static str,
    /// `timezone = "…"`, as its canonical IANA name; `None` is UTC.
    pub timezone: Option<&'static str>,
    /// `timeout = "…"` as written (`30s`, `5m`, `1h30m`); `None` is the runtime's default.
    pub timeout: Option<&'static str>,
    /// `missed = "once" | "skip" | "all"`; `once` when not given.
    pub missed: MissedPolicy,
    /// `retries = n`; 0 when not given.
    pub retries: u32,
    /// `backoff = "…"` as written (`30s`); `None` is the runtime's default.
    pub backoff: Option<&'static str>,
    /// `lease = "…"` as written (`10s`); `None` is the runtime's lease.
    pub lease: Option<&'static str>,
    /// `on = "one_replica" | "every_replica"`; `one_replica` when not given.
    pub on: RunOn,
    /// `catch_up = "…"` as written (`1d`); `None` is the policy's default window.
    pub catch_up: Option<&'static str>,
    /// `jitter = "…"` as written (`10m`); `None`: no jitter.
    pub jitter: Option<&'static str>,
    /// `expect_within = "…"` as written (`15m`); `None`: never overdue.
    pub expect_within: Option<&'static str>,
    /// `fixed`: an operator may not override the schedule.
    pub fixed: bool,
    /// `file!()` of the function.
    pub file: &'static str,
    /// The line of the function's name.
    pub line: u32,
    /// The function's doc comment, lines joined with `\n`, each trimmed of one leading space.
    pub doc: &'static str,
    /// Calls the function and turns its outcome into `Result<(), String>`.
    pub handler: fn() -> HandlerFuture,
}

inventory::collect!(Registration);

/// What a job's handler may return: `()` or `Result<(), E>` where `E: Display`.
///
/// This is the bound on the return type of a `#[cron]` function and of the handler given to
/// [`RuntimeBuilder::job`](crate::RuntimeBuilder::job): a run's outcome is recorded as success or as
/// failure with a message, and these two shapes say which without ambiguity.
///
/// | the handler returns | the run is recorded as |
/// |---|---|
/// | `()` | succeeded |
/// | `Ok(())` | succeeded |
/// | `Err(e)` | failed, with the message `format!("{e:#}")` |
///
/// `{:#}` is the alternate form of [`Display`](std::fmt::Display): for `anyhow::Error` it includes the
/// chain of causes (`while loading invoices: connection reset`); most other types print their plain
/// message. So `anyhow::Result<()>`, `Result<(), std::io::Error>`, `Result<(), String>` and
/// `Result<(), MyError>` (with `MyError: Display`) all work.
///
/// ```
/// use cron_runtime::Runtime;
///
/// #[derive(Debug)]
/// struct BillingError;
///
/// impl std::fmt::Display for BillingError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the ledger is locked")
///     }
/// }
///
/// let builder = Runtime::builder()
///     .job("billing::heartbeat", "* * * * *", || async {})
///     .job("billing::rotate", "0 3 * * *", || async { std::fs::remove_file("/tmp/old.log") })
///     .job("billing::close", "0 0 1 * *", || async { Err::<(), _>(BillingError) });
/// ```
///
/// A handler returning anything else does not compile: return `()`, or keep the value in your own
/// records and return `Ok(())`; to fail the run, return `Err` with an error that implements `Display`
/// (derive it with `thiserror`, or use `anyhow`).
///
/// ```compile_fail,E0277
/// use cron_runtime::Runtime;
///
/// // a job must return `()` or `Result<(), E>` where `E: Display`, not `{integer}`
/// let builder = Runtime::builder().job("billing::count", "0 2 * * *", || async { 42 });
/// ```
///
/// The trait is sealed: the runtime records exactly these two shapes, and cannot be extended outside
/// this crate.
#[diagnostic::on_unimplemented(
    message = "a job must return `()` or `Result<(), E>` where `E: Display`, not `{Self}`",
    label = "this return type is not `()` or `Result<(), E>`",
    note = "`cronverb::IntoOutcome` lists the return types a job can have and how each is recorded"
)]
pub trait IntoOutcome: sealed::Sealed {
    /// The run's outcome: `Ok(())` for success, `Err(message)` for a failure recorded with `message`.
    fn into_outcome(self) -> Result<(), String>;
}

mod sealed {
    /// Implemented only for the return types [`IntoOutcome`](super::IntoOutcome) accepts.
    // Reachable as a bound of `IntoOutcome` and nameable by no one else: that is what seals it.
    #[allow(unnameable_types)]
    pub trait Sealed {}

    impl Sealed for () {}

    impl<E> Sealed for Result<(), E> {}
}

impl IntoOutcome for () {
    fn into_outcome(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: std::fmt::Display> IntoOutcome for Result<(), E> {
    fn into_outcome(self) -> Result<(), String> {
        self.map_err(|e| format!("{e:#}"))
    }
}
