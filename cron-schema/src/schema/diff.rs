//! What changed between two schemas: verbs added, removed, and changed in their cron metadata.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Cron, Schema, Verb};
use crate::parse_duration;

/// The differences between an old and a new schema, each list sorted by module and verb name.
///
/// A verb is identified by its module and its full name. It has changed when its expression (fields
/// compared with whitespace normalized), zone (none is `UTC`), timeout (compared as durations: `90s` is
/// `1m30s`; none is the runtime's default), missed-run policy, retries, backoff and lease (compared as durations;
/// none is the runtime's default) or `on` differ. Doc comments and source locations
/// are not compared: moving a function does not change its schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    pub added: Vec<ModuleVerb>,
    pub removed: Vec<ModuleVerb>,
    pub changed: Vec<ChangedVerb>,
}

/// A verb and its module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleVerb {
    pub module: String,
    #[serde(flatten)]
    pub verb: Verb,
}

/// A verb present in both schemas whose cron metadata differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedVerb {
    pub module: String,
    pub name: String,
    pub changes: Vec<FieldChange>,
}

/// One field of the cron metadata, before and after. A timeout of `None` is the runtime's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    /// `expression`, `timezone`, `timeout`, `missed`, `retries`, `backoff`, `lease`, `on`, `catch_up`, `jitter`, `expect_within` or `fixed`.
    pub field: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl Diff {
    /// Whether the schemas have the same verbs with the same cron metadata.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

pub(super) fn diff(old: &Schema, new: &Schema) -> Diff {
    let index = |schema: &Schema| -> BTreeMap<(String, String), Verb> {
        schema
            .verbs()
            .map(|(module, verb)| ((module.name.clone(), verb.name.clone()), verb.clone()))
            .collect()
    };
    let old = index(old);
    let new = index(new);
    let mut diff = Diff::default();
    for ((module, name), verb) in &old {
        match new.get(&(module.clone(), name.clone())) {
            None => diff.removed.push(ModuleVerb {
                module: module.clone(),
                verb: verb.clone(),
            }),
            Some(new_verb) => {
                let changes = changes(&verb.cron, &new_verb.cron);
                if !changes.is_empty() {
                    diff.changed.push(ChangedVerb {
                        module: module.clone(),
                        name: name.clone(),
                        changes,
                    });
                }
            }
        }
    }
    for ((module, name), verb) in &new {
        if !old.contains_key(&(module.clone(), name.clone())) {
            diff.added.push(ModuleVerb {
                module: module.clone(),
                verb: verb.clone(),
            });
        }
    }
    diff
}

fn changes(old: &Cron, new: &Cron) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    let mut push = |field: &str, old: Option<String>, new: Option<String>| {
        changes.push(FieldChange {
            field: field.to_owned(),
            old,
            new,
        });
    };
    let words = |cron: &Cron| {
        cron.expression
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    if words(old) != words(new) {
        push("expression", Some(words(old)), Some(words(new)));
    }
    let zone = |cron: &Cron| cron.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
    if zone(old) != zone(new) {
        push("timezone", Some(zone(old)), Some(zone(new)));
    }
    if !same_duration(&old.timeout, &new.timeout) {
        push("timeout", old.timeout.clone(), new.timeout.clone());
    }
    if old.missed != new.missed {
        push(
            "missed",
            Some(old.missed.to_string()),
            Some(new.missed.to_string()),
        );
    }
    if old.retries != new.retries {
        push(
            "retries",
            Some(old.retries.to_string()),
            Some(new.retries.to_string()),
        );
    }
    if !same_duration(&old.backoff, &new.backoff) {
        push("backoff", old.backoff.clone(), new.backoff.clone());
    }
    if !same_duration(&old.lease, &new.lease) {
        push("lease", old.lease.clone(), new.lease.clone());
    }
    if old.on != new.on {
        push("on", Some(old.on.to_string()), Some(new.on.to_string()));
    }
    let window = |text: &Option<String>| text.as_deref().map(crate::parse_catch_up);
    let same_window = match (window(&old.catch_up), window(&new.catch_up)) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        _ => old.catch_up == new.catch_up,
    };
    if !same_window {
        push("catch_up", old.catch_up.clone(), new.catch_up.clone());
    }
    let width = |text: &Option<String>| text.as_deref().map(crate::parse_jitter);
    let same_jitter = match (width(&old.jitter), width(&new.jitter)) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        _ => old.jitter == new.jitter,
    };
    if !same_jitter {
        push("jitter", old.jitter.clone(), new.jitter.clone());
    }
    let within = |text: &Option<String>| text.as_deref().map(crate::parse_duration);
    let same_within = match (within(&old.expect_within), within(&new.expect_within)) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        _ => old.expect_within == new.expect_within,
    };
    if !same_within {
        push(
            "expect_within",
            old.expect_within.clone(),
            new.expect_within.clone(),
        );
    }
    if old.fixed != new.fixed {
        push(
            "fixed",
            Some(old.fixed.to_string()),
            Some(new.fixed.to_string()),
        );
    }
    changes
}

/// Two durations as written, compared as durations (`90s` is `1m30s`); `None` (the default) only equals
/// `None`.
fn same_duration(old: &Option<String>, new: &Option<String>) -> bool {
    match (old, new) {
        (Some(a), Some(b)) => match (parse_duration(a), parse_duration(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        },
        (a, b) => a == b,
    }
}

/// One line per verb: `+ added`, `- removed`, `~ changed: field old -> new, …`. Nothing when equal.
impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for ModuleVerb { module, verb } in &self.added {
            writeln!(f, "+ {module} {}: {}", verb.name, summary(&verb.cron))?;
        }
        for ModuleVerb { module, verb } in &self.removed {
            writeln!(f, "- {module} {}: {}", verb.name, summary(&verb.cron))?;
        }
        for changed in &self.changed {
            let changes: Vec<String> = changed.changes.iter().map(FieldChange::to_string).collect();
            writeln!(
                f,
                "~ {} {}: {}",
                changed.module,
                changed.name,
                changes.join(", ")
            )?;
        }
        Ok(())
    }
}

/// `expression `0 2 * * *` -> `0 3 * * *``; a value of `None` is `the default`.
impl fmt::Display for FieldChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |value: &Option<String>| match value {
            Some(value) => format!("`{value}`"),
            None => "the default".to_owned(),
        };
        write!(
            f,
            "{} {} -> {}",
            self.field,
            show(&self.old),
            show(&self.new)
        )
    }
}

/// `0 2 * * * Europe/Berlin timeout=10m missed=skip retries=3`, as on a `+cron` line.
fn summary(cron: &Cron) -> String {
    let mut text = cron
        .expression
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(zone) = &cron.timezone {
        text.push_str(&format!(" {zone}"));
    }
    if let Some(timeout) = &cron.timeout {
        text.push_str(&format!(" timeout={timeout}"));
    }
    if cron.missed != crate::MissedPolicy::default() {
        text.push_str(&format!(" missed={}", cron.missed));
    }
    if cron.retries != 0 {
        text.push_str(&format!(" retries={}", cron.retries));
    }
    if let Some(backoff) = &cron.backoff {
        text.push_str(&format!(" backoff={backoff}"));
    }
    if let Some(lease) = &cron.lease {
        text.push_str(&format!(" lease={lease}"));
    }
    if cron.on != crate::RunOn::default() {
        text.push_str(&format!(" on={}", cron.on));
    }
    if let Some(catch_up) = &cron.catch_up {
        text.push_str(&format!(" catch_up={catch_up}"));
    }
    if let Some(jitter) = &cron.jitter {
        text.push_str(&format!(" jitter={jitter}"));
    }
    if let Some(within) = &cron.expect_within {
        text.push_str(&format!(" expect_within={within}"));
    }
    if cron.fixed {
        text.push_str(" fixed");
    }
    text
}
