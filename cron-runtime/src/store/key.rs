//! What a deployment key may be registered with, for both stores and `cronverb deploy`
//! (docs/operations.md, "Deployment keys"): one set of jobs, and at most [`MAX_JOBS_PER_DEPLOYMENT`].

use cron_schema::{Diff, Schema};

use crate::defaults::MAX_JOBS_PER_DEPLOYMENT;

/// How many verbs of each kind a refusal names before it says how many more there are.
const NAMED: usize = 5;

/// Refuses a deployment of more than [`MAX_JOBS_PER_DEPLOYMENT`] jobs; `what` names it (`deployment
/// `billing@1``, `this runtime`).
pub fn check_job_count(what: &str, jobs: usize) -> Result<(), String> {
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
/// durations; none is the replica's default) and missed-run policy. Doc comments and source locations do
/// not count. A text that is not a cronverb schema is compared as JSON.
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
    use cron_schema::{Cron, Verb};

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
}
