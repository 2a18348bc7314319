//! What the `#[cron]` attribute submits to the registry at link time.

use std::future::Future;
use std::pin::Pin;

use cron_schema::MissedPolicy;

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
    /// `missed = "once" | "skip"`; `once` when not given.
    pub missed: MissedPolicy,
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

/// Converts what a handler returns into its outcome. Implemented for `()` and `Result<(), E: Display>`.
///
/// The error is formatted with `{:#}`, which for `anyhow::Error` includes its chain of causes
/// (`while loading invoices: connection reset`) and for other types is usually their plain `Display`.
#[diagnostic::on_unimplemented(
    message = "`#[cron]` functions must return `()` or `Result<(), E>` where `E: Display`, not `{Self}`",
    label = "this return type is not `()` or `Result<(), E>`"
)]
#[doc(hidden)]
pub trait IntoOutcome {
    fn into_outcome(self) -> Result<(), String>;
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
