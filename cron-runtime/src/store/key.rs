//! What a deployment key may be registered with, for both stores and `cronverb deploy`
//! (docs/operations.md, "Deployment keys"): one set of jobs, and at most [`MAX_JOBS_PER_DEPLOYMENT`];
//! and the fingerprint of that set of jobs, which a default key ends with.

use std::fmt::{self, Write as _};

use cron_schema::{Cron, Diff, Schema, Verb, format_duration, parse_duration};

use crate::defaults::MAX_JOBS_PER_DEPLOYMENT;

/// How many verbs of each kind a refusal names before it says how many more there are.
const NAMED: usize = 5;

/// Refuses a deployment of more than [`MAX_JOBS_PER_DEPLOYMENT`] jobs; `what` names it (`deployment
/// `billing@1``, `this runtime`).
pub(crate) fn check_job_count(what: &str, jobs: usize) -> Result<(), String> {
    if jobs > MAX_JOBS_PER_DEPLOYMENT {
        return Err(format!(
            "{what} has {jobs} jobs, more than the {MAX_JOBS_PER_DEPLOYMENT} a deployment may have \
             (docs/operations.md): split them into several modules"
        ));
    }
    Ok(())
}

/// Why `key`, registered with the schema `registered`, cannot be registered with `new`; `None` when they
/// are the same schema.
///
/// Two schemas are the same when [`Schema::diff`] finds nothing: the same verbs, each with the same
/// expression (fields compared with whitespace normalized), zone (none is `UTC`), timeout (compared as
/// durations; none is the replica's default), missed-run policy, retries, backoff (compared as
/// durations) and `on`. Doc comments and source locations do not count. A text that is not a cronverb schema is compared as JSON.
pub(crate) fn other_schema(key: &str, registered: &str, new: &str) -> Option<String> {
    if registered == new {
        return None;
    }
    let what = match (Schema::from_json(registered), Schema::from_json(new)) {
        (Ok(registered), Ok(new)) => {
            let diff = registered.diff(&new);
            if diff.is_empty() {
                return None;
            }
            describe(&diff)
        }
        _ => {
            let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
            match (value(registered), value(new)) {
                (Some(a), Some(b)) if a == b => return None,
                _ => "the schema is another one".to_owned(),
            }
        }
    };
    Some(format!(
        "deployment `{key}` is registered with other jobs: {what}; a deployment key is one set of \
         jobs: give this version its own key, such as its version number or commit \
         (docs/operations.md)"
    ))
}

/// The fingerprint of a schema's set of jobs: the `3f9a2c1d` of a default deployment key
/// (`billing+3f9a2c1d`, docs/runtime.md, "The deployment key").
///
/// Two schemas that [`other_schema`] takes for the same one have the same fingerprint, so a default key
/// names one set of jobs the way a registered key does: moving a function, rewording its doc comment,
/// respacing its expression or writing its timeout `90s` for `1m30s` keeps the key.
///
/// It is computed from the schema's text form (docs/schema.md), not from Rust's `Debug` or `Hash`, so
/// that it is the same across builds and Rust versions: the text form of the schema with every verb
/// reduced to what [`other_schema`] compares (the expression's fields separated by one space, no zone
/// for `UTC`, a timeout and a backoff as [`format_duration`] writes their durations, the missed-run
/// policy, retries, `on`, `catch_up`, `jitter`, `expect_within` and `fixed`, each left out at its
/// default as the text form does; no doc
/// comment, no source location), hashed with 64-bit FNV-1a over its UTF-8 bytes and folded to 32 bits
/// (the high half XOR the low half).
pub(crate) fn fingerprint(schema: &Schema) -> u32 {
    let mut hash = Fnv1a64::new();
    write!(hash, "{}", canonical(schema)).expect("hashing cannot fail");
    let hash = hash.0;
    (hash ^ (hash >> 32)) as u32
}

/// A duration as [`format_duration`] writes it, or the text as it is when it is not one.
fn duration_text(text: &str) -> String {
    parse_duration(text).map_or_else(|_| text.to_owned(), format_duration)
}

/// `schema` with every verb reduced to what [`other_schema`] compares, written the one way
/// [`fingerprint`] hashes.
fn canonical(schema: &Schema) -> Schema {
    Schema::new(schema.verbs().map(|(module, verb)| {
        let cron = &verb.cron;
        let cron = Cron {
            expression: cron
                .expression
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            timezone: cron.timezone.clone().filter(|zone| zone != "UTC"),
            timeout: cron
                .timeout
                .as_ref()
                .map(|timeout| match parse_duration(timeout) {
                    Ok(duration) => format_duration(duration),
                    Err(_) => timeout.clone(),
                }),
            missed: cron.missed,
            retries: cron.retries,
            backoff: cron
                .backoff
                .as_ref()
                .map(|backoff| match parse_duration(backoff) {
                    Ok(duration) => format_duration(duration),
                    Err(_) => backoff.clone(),
                }),
            lease: cron
                .lease
                .as_ref()
                .map(|lease| match parse_duration(lease) {
                    Ok(duration) => format_duration(duration),
                    Err(_) => lease.clone(),
                }),
            on: cron.on,
            catch_up: cron.catch_up.as_ref().map(|window| {
                match cron_schema::parse_catch_up(window) {
                    Ok(duration) => format_duration(duration),
                    Err(_) => window.clone(),
                }
            }),
            // Adding, changing or removing a jitter changes the job: a new key.
            jitter: cron
                .jitter
                .as_ref()
                .map(|jitter| match cron_schema::parse_jitter(jitter) {
                    Ok(duration) => format_duration(duration),
                    Err(_) => jitter.clone(),
                }),
            // So does an `expect_within`: the job's rows keep it (docs/operations.md, "Overdue").
            expect_within: cron.expect_within.as_deref().map(duration_text),
            // And `fixed`: the job's rows keep it (docs/operations.md, "Changing a schedule without
            // a build").
            fixed: cron.fixed,
        };
        (module.name.clone(), Verb::new(verb.name.clone(), cron))
    }))
}

/// 64-bit FNV-1a (the offset basis and prime of the FNV specification), fed as text is written.
struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Fnv1a64 {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl fmt::Write for Fnv1a64 {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for byte in text.bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(())
    }
}

/// `this schema adds 2 verbs (`a`, `b`), removes 1 (`c`), changes 1 (`d`: expression `* * * * *` ->
/// `0 * * * *`)`, naming at most [`NAMED`] verbs of each kind.
fn describe(diff: &Diff) -> String {
    let mut parts = Vec::new();
    let mut push = |kind: &str, names: Vec<String>| {
        if names.is_empty() {
            return;
        }
        let count = names.len();
        let noun = match (parts.is_empty(), count) {
            (false, _) => "",
            (true, 1) => " verb",
            (true, _) => " verbs",
        };
        parts.push(format!("{kind} {count}{noun} ({})", named(names)));
    };
    push(
        "adds",
        diff.added
            .iter()
            .map(|v| format!("`{}`", v.verb.name))
            .collect(),
    );
    push(
        "removes",
        diff.removed
            .iter()
            .map(|v| format!("`{}`", v.verb.name))
            .collect(),
    );
    push(
        "changes",
        diff.changed
            .iter()
            .map(|changed| {
                let changes: Vec<String> = changed.changes.iter().map(|c| c.to_string()).collect();
                format!("`{}`: {}", changed.name, changes.join(", "))
            })
            .collect(),
    );
    format!("this schema {}", parts.join(", "))
}

/// The first [`NAMED`] items, and how many more there are.
fn named(mut items: Vec<String>) -> String {
    let more = items.len().saturating_sub(NAMED);
    items.truncate(NAMED);
    let mut text = items.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    use cron_schema::MissedPolicy;

    use super::*;

    fn schema(verbs: &[(&str, Cron)]) -> String {
        Schema::new(
            verbs
                .iter()
                .map(|(name, cron)| ("app", Verb::new(*name, cron.clone()))),
        )
        .to_json()
    }

    #[test]
    fn the_same_jobs_are_the_same_schema_whatever_their_docs_and_spacing() {
        let registered = schema(&[("app::a", Cron::new("0 2 * * *").timeout("90s"))]);
        let new = Schema::new([(
            "app",
            Verb::new("app::a", Cron::new("0  2 * * *").timeout("1m30s"))
                .doc("nightly")
                .source("src/a.rs", 3),
        )])
        .to_json();
        assert_eq!(other_schema("app@1", &registered, &new), None);
    }

    #[test]
    fn a_refusal_names_what_differs_and_shortens_long_lists() {
        let old: Vec<(String, Cron)> = (0..8)
            .map(|i| (format!("app::old{i}"), Cron::new("* * * * *")))
            .chain([("app::kept".to_owned(), Cron::new("* * * * *"))])
            .collect();
        let new = [
            ("app::new", Cron::new("* * * * *")),
            ("app::kept", Cron::new("0 * * * *").timezone("Europe/Paris")),
        ];
        let old: Vec<(&str, Cron)> = old.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
        let refusal = other_schema("app@1", &schema(&old), &schema(&new)).unwrap();
        assert_eq!(
            refusal,
            "deployment `app@1` is registered with other jobs: this schema adds 1 verb (`app::new`), \
             removes 8 (`app::old0`, `app::old1`, `app::old2`, `app::old3`, `app::old4` and 3 more), \
             changes 1 (`app::kept`: expression `* * * * *` -> `0 * * * *`, timezone `UTC` -> \
             `Europe/Paris`); a deployment key is one set of jobs: give this version its own key, \
             such as its version number or commit (docs/operations.md)"
        );
    }

    #[test]
    fn texts_that_are_not_schemas_are_compared_as_json() {
        assert_eq!(
            other_schema("k", r#"{"a": 1, "b": 2}"#, r#"{"b":2,"a":1}"#),
            None
        );
        assert!(other_schema("k", r#"{"a": 1}"#, r#"{"a": 2}"#).is_some());
    }

    #[test]
    fn a_deployment_above_the_limit_is_refused() {
        assert!(check_job_count("deployment `k`", MAX_JOBS_PER_DEPLOYMENT).is_ok());
        assert_eq!(
            check_job_count("deployment `k`", MAX_JOBS_PER_DEPLOYMENT + 1),
            Err(
                "deployment `k` has 100001 jobs, more than the 100000 a deployment may have \
                 (docs/operations.md): split them into several modules"
                    .to_owned()
            )
        );
    }

    /// The schema the fingerprint is pinned for.
    fn billing() -> Schema {
        Schema::new([
            (
                "billing",
                Verb::new(
                    "billing::send_invoices",
                    Cron::new("0 2 * * *")
                        .timezone("Europe/Berlin")
                        .timeout("10m"),
                )
                .doc("Sends yesterday's invoices."),
            ),
            (
                "billing",
                Verb::new(
                    "billing::reminders",
                    Cron::new("*/15 * * * *").missed(MissedPolicy::Skip),
                ),
            ),
        ])
    }

    #[test]
    fn the_fingerprint_of_a_fixed_schema_does_not_change() {
        assert_eq!(
            canonical(&billing()).to_string(),
            "module billing {\n  verb reminders(Unit) Unit\n    +cron */15 * * * * missed=skip\n\n  \
             verb send_invoices(Unit) Unit\n    +cron 0 2 * * * Europe/Berlin timeout=10m\n}\n"
        );
        // FNV-1a 64 of the text above, folded: what any implementation of the specification gives. A
        // new value changes every default deployment key.
        assert_eq!(format!("{:08x}", fingerprint(&billing())), "dd98116e");
    }

    #[test]
    fn the_same_jobs_have_the_same_fingerprint_whatever_their_docs_spacing_and_spelling() {
        let reworded = Schema::new([
            (
                "billing",
                Verb::new(
                    "billing::send_invoices",
                    Cron::new(" 0  2 * * * ")
                        .timezone("Europe/Berlin")
                        .timeout("600s"),
                )
                .doc("Sends the invoices.")
                .source("src/invoices.rs", 40),
            ),
            (
                "billing",
                Verb::new(
                    "billing::reminders",
                    Cron::new("*/15 * * * *")
                        .timezone("UTC")
                        .missed(MissedPolicy::Skip),
                )
                .source("src/reminders.rs", 7),
            ),
        ]);
        assert_eq!(
            other_schema("billing@1", &billing().to_json(), &reworded.to_json()),
            None
        );
        assert_eq!(fingerprint(&reworded), fingerprint(&billing()));
    }

    #[test]
    fn what_runs_makes_another_fingerprint() {
        let with = |change: fn(&mut Verb)| {
            let mut schema = billing();
            change(&mut schema.modules[0].verbs[0]);
            fingerprint(&schema)
        };
        let changes: [fn(&mut Verb); 8] = [
            |v| v.name = "billing::remind".to_owned(),
            |v| v.cron.expression = "*/10 * * * *".to_owned(),
            |v| v.cron.timezone = Some("Europe/Paris".to_owned()),
            |v| v.cron.timeout = Some("1m".to_owned()),
            |v| v.cron.missed = MissedPolicy::Once,
            |v| v.cron.timeout = Some("5m".to_owned()),
            // Adding a jitter, then changing it, is a change of the job.
            |v| v.cron.jitter = Some("1m".to_owned()),
            |v| v.cron.jitter = Some("2m".to_owned()),
        ];
        let mut seen = vec![fingerprint(&billing())];
        for change in changes {
            let fingerprint = with(change);
            assert!(!seen.contains(&fingerprint), "{seen:?} {fingerprint}");
            seen.push(fingerprint);
        }
        let mut other_module = billing();
        other_module.modules[0].name = "invoicing".to_owned();
        assert_ne!(fingerprint(&other_module), fingerprint(&billing()));
    }
}
