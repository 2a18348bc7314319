//! The `#[cron(...)]` attribute as source code: its arguments and the function it is on, parsed and
//! validated. Enabled by the `syn` feature.
//!
//! This is the one implementation of the attribute's rules. The `#[cron]` macro calls [`parse`] on the
//! tokens the compiler gives it; `cronverb schema extract` calls it on the tokens it reads from `.rs` files.
//! Both therefore accept the same attributes and reject the others with the same messages, spanned on the
//! same tokens.
//!
//! # Example
//!
//! ```
//! use cron_schema::attribute;
//! use quote::quote;
//!
//! let cron = attribute::parse(
//!     quote!("0 2 * * *", timezone = "Europe/Berlin", timeout = "10m"),
//!     quote! {
//!         /// Sends yesterday's invoices.
//!         async fn send_invoices() {}
//!     },
//! )
//! .unwrap();
//! assert_eq!(cron.expression.value(), "0 2 * * *");
//! assert_eq!(cron.timezone, Some("Europe/Berlin"));
//! assert_eq!(cron.doc(), [attribute::DocLine::Text("Sends yesterday's invoices.".to_owned())]);
//!
//! let error = attribute::parse(quote!("0 2 * * MON"), quote!(async fn f() {})).unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "invalid cron expression: `MON` is not supported in the day-of-week field; write `1` instead",
//! );
//! ```

mod arguments;
mod errors;
mod function;

use std::fmt;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Expr, ExprLit, ItemFn, Lit, LitStr, Meta, Path};

use crate::{MissedPolicy, RunOn, Schedule};

use errors::Errors;

/// A valid `#[cron(...)]` and the function it is on.
///
/// The literals keep their spans, so that generated code and messages point at what the user wrote.
#[derive(Clone)]
#[non_exhaustive]
pub struct CronAttribute {
    /// The expression, as written.
    pub expression: LitStr,
    /// The expression, parsed.
    pub schedule: Schedule,
    /// The canonical IANA name of the zone; `None` is UTC.
    pub timezone: Option<&'static str>,
    /// The timeout, as written; `None` is the runtime's default.
    pub timeout: Option<LitStr>,
    /// `name = "…"`; `None` names the job after the function's module path and name.
    pub name: Option<LitStr>,
    /// `missed = "once" | "skip" | "all"`; `once` when not given.
    pub missed: MissedPolicy,
    /// `retries = n`: how many more times a failed, panicked or timed-out run is tried; 0 when not given.
    pub retries: u32,
    /// `backoff = "…"`, as written: the wait before the first retry; `None` is the runtime's default
    /// (10 s). Only given together with `retries`.
    pub backoff: Option<LitStr>,
    /// `lease = "…"`, as written: how long a claimed run stays owned without renewal; `None` is the
    /// runtime's lease (30 s unless set).
    pub lease: Option<LitStr>,
    /// `on = "one_replica" | "every_replica"`; `one_replica` when not given.
    pub on: RunOn,
    /// `catch_up = "…"`, as written: how far back a late occurrence still runs; `None` is the policy's
    /// default ([`catch_up_window`](crate::catch_up_window)).
    pub catch_up: Option<LitStr>,
    /// `jitter = "…"`, as written: each regular occurrence starts this much at most after its instant,
    /// by a fixed offset of the job ([`jitter_offset`](crate::jitter_offset)); `None`: no jitter.
    pub jitter: Option<LitStr>,
    /// `expect_within = "…"`, as written: an occurrence not succeeded this long after its instant is
    /// overdue (docs/operations.md, "Overdue"); `None`: never overdue.
    pub expect_within: Option<LitStr>,
    /// `fixed`: an operator may not override the job's schedule (docs/operations.md, "Changing a
    /// schedule without a build"); `false` when not given.
    pub fixed: bool,
    /// `crate = "…"`: the path of the cronverb crate in the generated code, for a renamed dependency or a
    /// re-export; `None` is `::cronverb`. It changes nothing about the job.
    pub crate_path: Option<Path>,
    /// The function, unchanged.
    pub function: ItemFn,
}

impl fmt::Debug for CronAttribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronAttribute")
            .field("expression", &self.expression.value())
            .field("timezone", &self.timezone)
            .field("timeout", &self.timeout.as_ref().map(LitStr::value))
            .field("name", &self.name.as_ref().map(LitStr::value))
            .field("missed", &self.missed)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff.as_ref().map(LitStr::value))
            .field("lease", &self.lease.as_ref().map(LitStr::value))
            .field("on", &self.on)
            .field("catch_up", &self.catch_up.as_ref().map(LitStr::value))
            .field("jitter", &self.jitter.as_ref().map(LitStr::value))
            .field(
                "expect_within",
                &self.expect_within.as_ref().map(LitStr::value),
            )
            .field("fixed", &self.fixed)
            .field(
                "crate_path",
                &self
                    .crate_path
                    .as_ref()
                    .map(|path| path.to_token_stream().to_string()),
            )
            .field("function", &self.function.sig.ident)
            .finish_non_exhaustive()
    }
}

/// Parses and validates `#[cron(args)]` on `item` (the tokens of the item the attribute is on, without the
/// attribute itself).
///
/// Every problem is reported at once: the error is a [`syn::Error::combine`] of one error per problem,
/// each spanned on the token that is wrong. An error inside the expression is spanned on the offending
/// characters where the span of the literal can be subdivided, and on the whole literal otherwise.
pub fn parse(args: TokenStream, item: TokenStream) -> syn::Result<CronAttribute> {
    let mut errors = Errors::default();
    let args = arguments::parse(args, &mut errors);
    let function = function::function(item, &mut errors);
    if let Some(error) = errors.finish() {
        return Err(error);
    }
    match (args, function) {
        (Some(args), Some(function)) => Ok(CronAttribute {
            expression: args.expression,
            schedule: args.schedule,
            timezone: args.timezone,
            timeout: args.timeout,
            name: args.name,
            missed: args.missed,
            retries: args.retries,
            backoff: args.backoff,
            lease: args.lease,
            on: args.on,
            catch_up: args.catch_up,
            jitter: args.jitter,
            expect_within: args.expect_within,
            fixed: args.fixed,
            crate_path: args.crate_path,
            function,
        }),
        // Both push an error whenever they return `None`; this is not reached.
        _ => Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "invalid `#[cron]` attribute",
        )),
    }
}

/// One line of a doc comment.
#[derive(Clone)]
pub enum DocLine {
    /// A `///` line or `#[doc = "…"]`, trimmed of one leading space.
    Text(String),
    /// `#[doc = …]` with a value that is not a literal, such as `include_str!("…")`.
    Expr(Box<Expr>),
}

impl fmt::Debug for DocLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocLine::Text(text) => f.debug_tuple("Text").field(text).finish(),
            DocLine::Expr(expr) => f
                .debug_tuple("Expr")
                .field(&expr.to_token_stream().to_string())
                .finish(),
        }
    }
}

/// Expressions are equal when their tokens are.
impl PartialEq for DocLine {
    fn eq(&self, other: &DocLine) -> bool {
        match (self, other) {
            (DocLine::Text(a), DocLine::Text(b)) => a == b,
            (DocLine::Expr(a), DocLine::Expr(b)) => {
                a.to_token_stream().to_string() == b.to_token_stream().to_string()
            }
            _ => false,
        }
    }
}

impl Eq for DocLine {}

impl CronAttribute {
    /// The function's doc comment, line by line. The registration joins the lines with `\n`.
    pub fn doc(&self) -> Vec<DocLine> {
        doc(&self.function.attrs)
    }
}

/// The doc comment of an item, line by line.
pub fn doc(attrs: &[Attribute]) -> Vec<DocLine> {
    attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(meta) if meta.path.is_ident("doc") => Some(&meta.value),
            _ => None,
        })
        .map(|value| match value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => {
                let text = lit.value();
                DocLine::Text(text.strip_prefix(' ').map(str::to_owned).unwrap_or(text))
            }
            other => DocLine::Expr(Box::new(other.clone())),
        })
        .collect()
}
