//! The arguments of `#[cron(...)]`: parsed, then checked with the grammar, zone, duration and policy
//! parsers of this crate.

use std::ops::Range;
use std::str::FromStr;

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprAssign, ExprLit, Ident, Lit, LitStr, Path, Token};

use super::errors::Errors;
use crate::{MAX_BACKOFF, MAX_RETRIES, MIN_BACKOFF, MIN_LEASE, MissedPolicy, RunOn, Schedule};

/// The arguments, every one of them valid.
pub(super) struct Args {
    pub(super) expression: LitStr,
    pub(super) schedule: Schedule,
    pub(super) timezone: Option<&'static str>,
    pub(super) timeout: Option<LitStr>,
    pub(super) name: Option<LitStr>,
    pub(super) missed: MissedPolicy,
    pub(super) retries: u32,
    pub(super) backoff: Option<LitStr>,
    pub(super) lease: Option<LitStr>,
    pub(super) on: RunOn,
    pub(super) catch_up: Option<LitStr>,
    pub(super) jitter: Option<LitStr>,
    pub(super) expect_within: Option<LitStr>,
    pub(super) fixed: bool,
    pub(super) crate_path: Option<Path>,
}

const KEYS: &str = "`timezone`, `timeout`, `name`, `missed`, `catch_up`, `retries`, `backoff`, \
                    `lease`, `on`, `jitter`, `expect_within`, `fixed`, `crate`";

/// The named arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Timezone,
    Timeout,
    Name,
    Missed,
    Retries,
    Backoff,
    Lease,
    On,
    CatchUp,
    Jitter,
    ExpectWithin,
    Crate,
}

impl Key {
    fn from_ident(ident: &Ident) -> Option<Key> {
        match ident.to_string().as_str() {
            "timezone" => Some(Key::Timezone),
            "timeout" => Some(Key::Timeout),
            "name" => Some(Key::Name),
            "missed" => Some(Key::Missed),
            "retries" => Some(Key::Retries),
            "backoff" => Some(Key::Backoff),
            "lease" => Some(Key::Lease),
            "on" => Some(Key::On),
            "catch_up" => Some(Key::CatchUp),
            "jitter" => Some(Key::Jitter),
            "expect_within" => Some(Key::ExpectWithin),
            "crate" => Some(Key::Crate),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Key::Timezone => "timezone",
            Key::Timeout => "timeout",
            Key::Name => "name",
            Key::Missed => "missed",
            Key::Retries => "retries",
            Key::Backoff => "backoff",
            Key::Lease => "lease",
            Key::On => "on",
            Key::CatchUp => "catch_up",
            Key::Jitter => "jitter",
            Key::ExpectWithin => "expect_within",
            Key::Crate => "crate",
        }
    }

    /// The key meant by a name other schedulers use for it.
    fn similar(ident: &Ident) -> Option<Key> {
        match ident.to_string().as_str() {
            "tz" | "zone" | "time_zone" => Some(Key::Timezone),
            "retry" | "max_retries" | "attempts" | "max_attempts" => Some(Key::Retries),
            "retry_delay" | "retry_backoff" | "delay" | "backoff_delay" => Some(Key::Backoff),
            "run_on" | "replicas" | "runs_on" | "mode" => Some(Key::On),
            "catchup" | "catch_up_window" | "catchup_window" | "misfire_grace_time" | "fill"
            | "starting_deadline" => Some(Key::CatchUp),
            "splay" | "spread" | "random_delay" | "randomized_delay" | "start_delay" => {
                Some(Key::Jitter)
            }
            "expected_within" | "deadline" | "overdue_after" | "alert_after" | "grace"
            | "max_lateness" => Some(Key::ExpectWithin),
            "lease_duration" | "lease_time" | "visibility_timeout" | "heartbeat" => {
                Some(Key::Lease)
            }
            _ => None,
        }
    }

    /// A valid value, for messages.
    fn example(self) -> &'static str {
        match self {
            Key::Timezone => "Europe/Berlin",
            Key::Timeout => "5m",
            Key::Name => "billing::send_invoices",
            Key::Missed => "skip",
            Key::Retries => "3",
            Key::Backoff => "30s",
            Key::Lease => "10s",
            Key::On => "every_replica",
            Key::CatchUp => "1d",
            Key::Jitter => "10m",
            Key::ExpectWithin => "15m",
            Key::Crate => "cv",
        }
    }
}

/// Parses and validates the arguments, pushing every problem to `errors`; `None` when there was one.
pub(super) fn parse(args: TokenStream, errors: &mut Errors) -> Option<Args> {
    let before = errors.len();
    let list = match Punctuated::<Expr, Token![,]>::parse_terminated.parse2(args) {
        Ok(list) => list,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };

    let mut expression = None;
    let mut expression_seen = false;
    let mut timezone = None;
    let mut timeout = None;
    let mut name = None;
    let mut missed = MissedPolicy::default();
    let mut retries = None;
    let mut backoff = None;
    let mut lease = None;
    let mut on = None;
    let mut catch_up = None;
    let mut jitter = None;
    let mut expect_within = None;
    let mut crate_path = None;
    let mut fixed = false;
    let mut keys_seen = Vec::new();
    // The arguments whose combination with another one is checked once all are read.
    let mut missed_arg = None;

    for (index, arg) in list.iter().enumerate() {
        // `fixed` is a flag, the one argument without a value (docs/attribute.md, "`fixed`").
        if let Some(ident) = flag_named(arg, FIXED) {
            if fixed {
                errors.spanned(ident, format!("duplicate `#[cron]` argument `{FIXED}`"));
            }
            fixed = true;
            expression_seen |= index == 0;
            if index == 0 {
                errors.spanned(
                    arg,
                    "the cron expression must be the first argument of `#[cron]`, before `fixed`",
                );
            }
            continue;
        }
        if let Some(misuse) = flag_with_a_value(arg, FIXED) {
            errors.spanned(
                misuse,
                format!(
                    "`{FIXED}` takes no value: write `#[cron(\"0 2 * * *\", {FIXED})]` for a job whose \
                     schedule an operator may not override, or leave it out"
                ),
            );
            continue;
        }
        let Expr::Assign(assign) = arg else {
            let is_string = string_literal(arg).is_some();
            if index == 0 {
                match string_literal(arg) {
                    Some(lit) => expression = check_expression(lit, errors),
                    None => errors.spanned(
                        arg,
                        "the cron expression must be a string literal, such as `\"0 2 * * *\"`; \
                         `#[cron]` checks it at compile time and cannot see the value of a constant or a macro",
                    ),
                }
            } else if is_string && expression_seen {
                errors.spanned(
                    arg,
                    format!(
                        "`#[cron]` takes one cron expression; the other arguments are written \
                         `key = \"value\"` with key one of: {KEYS}"
                    ),
                );
            } else if is_string {
                errors.spanned(
                    arg,
                    "the cron expression must be the first argument of `#[cron]`",
                );
            } else {
                errors.spanned(
                    arg,
                    format!("expected `key = \"value\"` with key one of: {KEYS}"),
                );
            }
            expression_seen |= index == 0 || is_string;
            continue;
        };

        let ident = match &*assign.left {
            Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
                path.path.get_ident()
            }
            _ => None,
        };
        let Some(ident) = ident else {
            errors.spanned(
                &assign.left,
                format!("expected an argument name, one of: {KEYS}"),
            );
            continue;
        };
        let Some(key) = Key::from_ident(ident) else {
            let hint = match Key::similar(ident) {
                Some(key) => format!(" (did you mean `{}`?)", key.as_str()),
                None => String::new(),
            };
            errors.spanned(
                ident,
                format!("unknown `#[cron]` argument `{ident}`{hint}; expected one of: {KEYS}"),
            );
            continue;
        };
        if keys_seen.contains(&key) {
            errors.spanned(ident, format!("duplicate `#[cron]` argument `{ident}`"));
            continue;
        }
        keys_seen.push(key);

        if key == Key::Retries {
            if let Some(count) = check_retries(&assign.right, errors) {
                retries = Some((count, assign));
            }
            continue;
        }
        let Some(value) = string_literal(&assign.right) else {
            errors.spanned(
                &assign.right,
                format!(
                    "`{ident}` takes a string literal, such as `{ident} = \"{}\"`",
                    key.example()
                ),
            );
            continue;
        };

        match key {
            Key::Timezone => match crate::parse_timezone(&value.value()) {
                Ok(zone) => timezone = Some(zone.name()),
                Err(error) => errors.at(value.span(), error),
            },
            Key::Timeout => match crate::parse_duration(&value.value()) {
                Ok(_) => timeout = Some(value.clone()),
                Err(error) => errors.at(value.span(), error),
            },
            Key::Name => {
                if check_name(value, errors) {
                    name = Some(value.clone());
                }
            }
            Key::Missed => match MissedPolicy::from_str(&value.value()) {
                Ok(policy) => {
                    missed = policy;
                    missed_arg = Some(assign);
                }
                Err(error) => errors.at(value.span(), error),
            },
            Key::Retries => {}
            Key::Backoff => {
                if check_backoff(value, errors) {
                    backoff = Some((value.clone(), assign));
                }
            }
            Key::Lease => {
                if check_lease(value, errors) {
                    lease = Some((value.clone(), assign));
                }
            }
            Key::On => match RunOn::from_str(&value.value()) {
                Ok(run_on) => on = Some(run_on),
                Err(_) => errors.at(
                    value.span(),
                    format!(
                        "unknown `on` value `{}`; expected `on = \"one_replica\"` (the default: each \
                         occurrence runs on one replica) or `on = \"every_replica\"` (on every live \
                         replica)",
                        value.value().escape_default()
                    ),
                ),
            },
            Key::CatchUp => match crate::parse_catch_up(&value.value()) {
                Ok(window) => catch_up = Some((value.clone(), window, assign)),
                Err(error) => errors.at(value.span(), error),
            },
            Key::Jitter => match crate::parse_jitter(&value.value()) {
                Ok(width) => jitter = Some((value.clone(), width, assign)),
                Err(error) => errors.at(value.span(), error),
            },
            Key::ExpectWithin => match crate::parse_duration(&value.value()) {
                Ok(within) => expect_within = Some((value.clone(), within, assign)),
                Err(error) => errors.at(value.span(), error),
            },
            Key::Crate => crate_path = check_crate_path(value, errors),
        }
    }

    // A `retries` that is wrong is reported once, not again as missing beside `backoff`.
    let retries_wrong = keys_seen.contains(&Key::Retries) && retries.is_none();
    check_combinations(
        retries,
        backoff
            .as_ref()
            .map(|(_, assign)| *assign)
            .filter(|_| !retries_wrong),
        lease.as_ref().map(|(_, assign)| *assign),
        on,
        missed_arg,
        errors,
    );
    if let Some((_, _, assign)) = &catch_up
        && on == Some(RunOn::EveryReplica)
    {
        errors.spanned(
            assign,
            "a job with `on = \"every_replica\"` has no missed runs to catch up: every live replica \
             runs each occurrence when it comes, and none is claimed late; remove `catch_up`",
        );
    } else if on != Some(RunOn::EveryReplica)
        && let Some((_, schedule)) = &expression
    {
        // The window against the policy and the schedule (`check_catch_up`): on `catch_up` where it
        // is written, else on `missed = "all"`, whose default window it is.
        let window = catch_up.as_ref().map(|(_, window, _)| *window);
        if let Err(error) =
            crate::check_catch_up(schedule, &schedule_text(&expression), missed, window)
        {
            match (&catch_up, missed_arg) {
                (Some((_, _, assign)), _) => errors.spanned(assign, error),
                (None, Some(assign)) => errors.spanned(assign, error),
                (None, None) => errors.at(Span::call_site(), error),
            }
        }
    }

    // The jitter against the schedule (`check_jitter`), on `jitter = "…"` where it is written.
    if let Some((_, width, assign)) = &jitter {
        if on == Some(RunOn::EveryReplica) {
            errors.spanned(
                assign,
                "a job with `on = \"every_replica\"` starts on every live replica at each \
                 occurrence, not through the claim that spreads starts; remove `jitter`",
            );
        } else if let Some((_, schedule)) = &expression
            && let Err(error) = crate::check_jitter(schedule, &schedule_text(&expression), *width)
        {
            errors.spanned(assign, error);
        }
    }

    // An occurrence expected to succeed within a span (docs/operations.md, "Overdue") is one the
    // store tracks; a job on every replica has no one occurrence to track.
    if let Some((_, within, assign)) = &expect_within {
        if on == Some(RunOn::EveryReplica) {
            errors.spanned(
                assign,
                "a job with `on = \"every_replica\"` runs on every live replica, with no one run of an \
                 occurrence to be overdue; remove `expect_within`",
            );
        } else if let Some((_, width, _)) = &jitter
            && let Err(error) = crate::check_expect_within(*width, *within)
        {
            // A run may start up to its jitter after its instant (`check_expect_within`).
            errors.spanned(assign, error);
        }
    }

    if !expression_seen {
        errors.at(
            Span::call_site(),
            "`#[cron]` needs a cron expression as its first argument, such as `#[cron(\"0 2 * * *\")]`",
        );
    }

    if errors.len() > before {
        return None;
    }
    let (expression, schedule) = expression?;
    Some(Args {
        expression,
        schedule,
        timezone,
        timeout,
        name,
        missed,
        retries: retries.map_or(0, |(count, _)| count),
        backoff: backoff.map(|(value, _)| value),
        lease: lease.map(|(value, _)| value),
        on: on.unwrap_or_default(),
        catch_up: catch_up.map(|(value, ..)| value),
        jitter: jitter.map(|(value, ..)| value),
        expect_within: expect_within.map(|(value, ..)| value),
        fixed,
        crate_path,
    })
}

/// The one argument written as a bare word.
const FIXED: &str = "fixed";

/// The identifier of `arg` where it is the bare word `name`.
fn flag_named<'a>(arg: &'a Expr, name: &str) -> Option<&'a Ident> {
    match arg {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            path.path.get_ident().filter(|ident| *ident == name)
        }
        _ => None,
    }
}

/// `arg` where it gives the flag `name` a value: `fixed = "yes"`, `fixed = true`, `fixed(1)`.
fn flag_with_a_value<'a>(arg: &'a Expr, name: &str) -> Option<&'a Expr> {
    let named = match arg {
        Expr::Assign(assign) => flag_named(&assign.left, name).is_some(),
        Expr::Call(call) => flag_named(&call.func, name).is_some(),
        _ => false,
    };
    named.then_some(arg)
}

/// The expression's text, for messages.
fn schedule_text(expression: &Option<(LitStr, Schedule)>) -> String {
    expression
        .as_ref()
        .map(|(lit, _)| lit.value())
        .unwrap_or_default()
}

/// `retries = n`: an integer literal from 0 to [`MAX_RETRIES`].
fn check_retries(value: &Expr, errors: &mut Errors) -> Option<u32> {
    let lit = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit),
            attrs,
        }) if attrs.is_empty() => lit,
        _ if string_literal(value).is_some_and(|lit| lit.value().parse::<u32>().is_ok()) => {
            let count = string_literal(value).map(LitStr::value).unwrap_or_default();
            errors.spanned(
                value,
                format!("`retries` takes an integer, not a string: write `retries = {count}`"),
            );
            return None;
        }
        _ => {
            errors.spanned(
                value,
                format!(
                    "`retries` takes an integer literal from 0 to {MAX_RETRIES}, such as `retries = 3`: \
                     how many more times a failed, panicked or timed-out run is tried"
                ),
            );
            return None;
        }
    };
    if !lit.suffix().is_empty() {
        errors.at(
            lit.span(),
            format!(
                "`retries` takes an integer literal without a suffix, such as `retries = {}`",
                lit.base10_digits()
            ),
        );
        return None;
    }
    match lit.base10_parse::<u32>() {
        Ok(count) if count <= MAX_RETRIES => Some(count),
        _ => {
            errors.at(
        lit.span(),
        format!(
            "`retries = {}` is too many: a job retries at most {MAX_RETRIES} times; with the backoff \
             doubling up to an hour, a few retries, such as `retries = 3`, cover most outages",
                    lit.base10_digits()
                ),
            );
            None
        }
    }
}

/// `backoff = "…"`: a duration from [`MIN_BACKOFF`] to [`MAX_BACKOFF`].
fn check_backoff(lit: &LitStr, errors: &mut Errors) -> bool {
    match crate::parse_duration(&lit.value()) {
        Ok(backoff) if (MIN_BACKOFF..=MAX_BACKOFF).contains(&backoff) => true,
        Ok(_) => {
            errors.at(
                lit.span(),
                format!(
                    "backoff `{}` is out of range: the wait before the first retry is at least {} and \
                     at most {}, such as `backoff = \"30s\"`",
                    lit.value().escape_default(),
                    crate::format_duration(MIN_BACKOFF),
                    crate::format_duration(MAX_BACKOFF),
                ),
            );
            false
        }
        Err(error) => {
            errors.at(lit.span(), error);
            false
        }
    }
}

/// `lease = "…"`: a duration from [`MIN_LEASE`] to [`MAX_DURATION`](crate::MAX_DURATION)
/// (docs/attribute.md, "`lease`").
fn check_lease(lit: &LitStr, errors: &mut Errors) -> bool {
    match crate::parse_duration(&lit.value()) {
        Ok(lease) if lease >= MIN_LEASE => true,
        Ok(_) => {
            errors.at(
                lit.span(),
                format!(
                    "lease `{}` is too short: the runtime renews a run's lease every third of it, at \
                     most once a second, so a lease is at least {}, such as `lease = \"10s\"`",
                    lit.value().escape_default(),
                    crate::format_duration(MIN_LEASE),
                ),
            );
            false
        }
        // `parse_duration` refuses more than `MAX_DURATION` itself.
        Err(error) => {
            errors.at(lit.span(), error);
            false
        }
    }
}

/// The arguments that are valid alone but not together: `backoff` needs `retries`, and a job on every
/// replica neither retries, nor has missed runs, nor holds a lease (docs/attribute.md, "`on`").
fn check_combinations(
    retries: Option<(u32, &ExprAssign)>,
    backoff: Option<&ExprAssign>,
    lease: Option<&ExprAssign>,
    on: Option<RunOn>,
    missed: Option<&ExprAssign>,
    errors: &mut Errors,
) {
    if let Some(backoff) = backoff {
        match retries {
            None => errors.spanned(
                backoff,
                "`backoff` does nothing without `retries`: it is the wait before the first retry; \
                 add `retries = 3`, say, or remove `backoff`",
            ),
            Some((0, _)) => errors.spanned(
                backoff,
                "`backoff` does nothing with `retries = 0`: it is the wait before the first retry; \
                 set `retries = 3`, say, or remove `backoff`",
            ),
            Some(_) => {}
        }
    }
    if on != Some(RunOn::EveryReplica) {
        return;
    }
    if let Some((count, retries)) = retries
        && count > 0
    {
        errors.spanned(
            retries,
            "a job with `on = \"every_replica\"` cannot retry: retries are kept in the store, and a job \
             on every replica claims nothing there; remove `retries`, or run the job on one replica",
        );
    }
    if let Some(lease) = lease {
        errors.spanned(
            lease,
            "a job with `on = \"every_replica\"` holds no lease: every live replica runs each occurrence \
             and claims nothing in the store; remove `lease`, or run the job on one replica",
        );
    }
    if let Some(missed) = missed {
        errors.spanned(
            missed,
            "a job with `on = \"every_replica\"` has no missed runs to decide about: every live replica \
             runs each occurrence when it comes, and none is claimed late; remove `missed`",
        );
    }
}

fn string_literal(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit),
            attrs,
        }) if attrs.is_empty() => Some(lit),
        _ => None,
    }
}

fn check_expression(lit: &LitStr, errors: &mut Errors) -> Option<(LitStr, Schedule)> {
    match Schedule::parse(&lit.value()) {
        Ok(schedule) => Some((lit.clone(), schedule)),
        Err(error) => {
            errors.at(
                span_within(lit, error.span()),
                format!("invalid cron expression: {error}"),
            );
            None
        }
    }
}

/// The span of `range` (bytes of the literal's value) inside the literal, where the compiler can give one
/// (nightly, and only for a literal without escapes); otherwise the whole literal's span.
fn span_within(lit: &LitStr, range: Range<usize>) -> Span {
    let token = lit.token();
    let text = token.to_string();
    let value = lit.value();
    let Some(open) = text.find('"') else {
        return lit.span();
    };
    let start = open + 1;
    let maps_byte_for_byte = text.get(start..start + value.len()) == Some(value.as_str())
        && text[start + value.len()..].starts_with('"');
    if !maps_byte_for_byte {
        return lit.span();
    }
    token
        .subspan(start + range.start..start + range.end)
        .unwrap_or_else(|| lit.span())
}

/// The path of the cronverb crate as the user's code names it: `cv` for a dependency renamed
/// `cv = { package = "cronverb" }`, or a path to a re-export. Its tokens carry the literal's span, so
/// the generated code resolves it where the attribute is written.
fn check_crate_path(lit: &LitStr, errors: &mut Errors) -> Option<Path> {
    match lit.parse_with(Path::parse_mod_style) {
        Ok(path) => Some(path),
        Err(_) => {
            errors.at(
                lit.span(),
                format!(
                    "`{}` is not a path; `crate` names the cronverb crate as this crate refers to it, \
                     such as `crate = \"cv\"` for the dependency `cv = {{ package = \"cronverb\" }}`",
                    lit.value().escape_default()
                ),
            );
            None
        }
    }
}

/// A verb name is what operators type and read: no whitespace, no punctuation beyond path separators.
fn check_name(lit: &LitStr, errors: &mut Errors) -> bool {
    let name = lit.value();
    if name.is_empty() {
        errors.at(
            lit.span(),
            "`name` must not be empty; leave it out to name the job after the function's path",
        );
        return false;
    }
    let allowed = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    match name.chars().find(|&c| !allowed(c)) {
        None => true,
        Some(c) => {
            let what = if c.is_whitespace() {
                "whitespace".to_owned()
            } else {
                format!("`{}`", c.escape_default())
            };
            errors.at(
                lit.span(),
                format!(
                    "`name` `{}` contains {what}; use letters, digits, `_`, `-`, `.` and `:`",
                    name.escape_default()
                ),
            );
            false
        }
    }
}
