//! The schema of a build: its verbs with their cron metadata, grouped by module, in a text form for
//! people and a versioned JSON form for tools. The forms are described in `docs/schema.md`.

mod diff;
mod text;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{MissedPolicy, RunOn};

pub use diff::{ChangedVerb, Diff, FieldChange, ModuleVerb};

/// The version of the JSON form this crate writes, and the only one it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The verbs of a build, grouped by module.
///
/// Modules are sorted by name and the verbs of a module by name, whatever order they were given in, so
/// that both forms are stable: the same build always gives the same text.
///
/// ```
/// use cron_schema::{Cron, Schema, Verb};
///
/// let schema = Schema::new([(
///     "billing",
///     Verb::new("billing::send_invoices", Cron::new("0 2 * * *").timezone("Europe/Berlin")),
/// )]);
/// assert_eq!(
///     schema.to_string(),
///     "module billing {\n  verb send_invoices(Unit) Unit\n    +cron 0 2 * * * Europe/Berlin\n}\n",
/// );
/// let json = schema.to_json();
/// assert_eq!(Schema::from_json(&json).unwrap(), schema);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// The version of the JSON form: [`SCHEMA_VERSION`].
    pub version: u32,
    pub modules: Vec<Module>,
}

/// One module: the verbs of one crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub name: String,
    pub verbs: Vec<Verb>,
}

/// One verb: a scheduled handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verb {
    /// The full verb name, as the registry has it: `name = "…"`, or the function's module path and name.
    pub name: String,
    pub cron: Cron,
    /// The doc comment, lines joined with `\n`; empty when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Where the verb is declared; the text form does not carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// The cron metadata of a verb, as written in its `#[cron]` attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cron {
    /// The expression, as written.
    pub expression: String,
    /// The IANA zone; `None` is UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The timeout, as written; `None` is the runtime's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default)]
    pub missed: MissedPolicy,
    /// `retries = n`; 0 (no retry) when absent, and then left out of both forms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The wait before the first retry, as written; `None` is the runtime's default (10 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// How long a claimed run stays owned without renewal, as written; `None` is the runtime's lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// `on = "…"`; `one_replica` when absent, and then left out of both forms.
    #[serde(default, skip_serializing_if = "is_one_replica")]
    pub on: RunOn,
    /// The catch-up window of late occurrences, as written (`1d`); `None` is the policy's default
    /// ([`catch_up_window`](crate::catch_up_window)), and then left out of both forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// The jitter of its regular starts, as written (`10m`; docs/runtime.md, "Jitter"); `None`: none,
    /// and then left out of both forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// How long after its instant an occurrence is expected to have succeeded, as written (`15m`;
    /// docs/operations.md, "Overdue"); `None`: never overdue, and then left out of both forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_within: Option<String>,
    /// `fixed`: an operator may not override the schedule (docs/operations.md, "Changing a schedule
    /// without a build"); `false` when absent, and then left out of both forms.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fixed: bool,
}

fn is_false(fixed: &bool) -> bool {
    !*fixed
}

fn is_zero(retries: &u32) -> bool {
    *retries == 0
}

fn is_one_replica(on: &RunOn) -> bool {
    *on == RunOn::OneReplica
}

/// A source location: the file relative to the root of the cargo workspace (what `file!()` gives), and
/// the line of the function's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Source {
    pub file: String,
    pub line: u32,
}

/// A schema that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema version {found} is not supported; this build reads version {SCHEMA_VERSION}")]
    Version { found: u64 },
    #[error("line {line}: {message}")]
    Text { line: usize, message: String },
}

impl Schema {
    /// A schema of the given verbs, each with the name of its module. A module named twice is one module.
    pub fn new<M: Into<String>>(verbs: impl IntoIterator<Item = (M, Verb)>) -> Schema {
        let mut modules: BTreeMap<String, Vec<Verb>> = BTreeMap::new();
        for (module, verb) in verbs {
            modules.entry(module.into()).or_default().push(verb);
        }
        Schema {
            version: SCHEMA_VERSION,
            modules: modules
                .into_iter()
                .map(|(name, verbs)| Module { name, verbs })
                .collect(),
        }
        .sorted()
    }

    /// Sorts modules and verbs by name (then by source), and removes verbs listed twice.
    fn sorted(mut self) -> Schema {
        self.modules.sort_by(|a, b| a.name.cmp(&b.name));
        for module in &mut self.modules {
            module.verbs.sort_by(|a, b| {
                (&a.name, &a.source.as_ref().map(|s| (&s.file, s.line)))
                    .cmp(&(&b.name, &b.source.as_ref().map(|s| (&s.file, s.line))))
            });
            module.verbs.dedup();
        }
        self
    }

    /// Every verb, with its module.
    pub fn verbs(&self) -> impl Iterator<Item = (&Module, &Verb)> {
        self.modules
            .iter()
            .flat_map(|module| module.verbs.iter().map(move |verb| (module, verb)))
    }

    /// The JSON form, pretty-printed, ending with a newline.
    pub fn to_json(&self) -> String {
        let mut json = serde_json::to_string_pretty(self).expect("a schema serializes to JSON");
        json.push('\n');
        json
    }

    /// Reads the JSON form, refusing a version other than [`SCHEMA_VERSION`].
    pub fn from_json(json: &str) -> Result<Schema, SchemaError> {
        /// The version alone: the rest of the text is skipped, not built into a tree (a schema of
        /// 100,000 verbs is megabytes of JSON).
        #[derive(Deserialize)]
        struct Versioned {
            #[serde(default)]
            version: Option<serde_json::Value>,
        }
        // A text that is not an object is refused below, with the error of the whole schema.
        if let Ok(Versioned {
            version: Some(version),
        }) = serde_json::from_str(json)
            && let Some(version) = version.as_u64()
            && version != u64::from(SCHEMA_VERSION)
        {
            return Err(SchemaError::Version { found: version });
        }
        // Read again from the text, so that an error says where it is.
        Ok(serde_json::from_str::<Schema>(json)?.sorted())
    }

    /// Reads the text form (what [`Display`](fmt::Display) writes). Source locations are not part of it.
    pub fn from_text(text: &str) -> Result<Schema, SchemaError> {
        text::parse(text).map(Schema::sorted)
    }

    /// Reads either form: JSON when the first character that is not whitespace is `{`, text otherwise.
    pub fn from_json_or_text(input: &str) -> Result<Schema, SchemaError> {
        if input.trim_start().starts_with('{') {
            Schema::from_json(input)
        } else {
            Schema::from_text(input)
        }
    }

    /// What changed from `self` to `new`.
    pub fn diff(&self, new: &Schema) -> Diff {
        diff::diff(self, new)
    }
}

/// The text form, described in `docs/schema.md`.
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        text::write(self, f)
    }
}

impl Verb {
    pub fn new(name: impl Into<String>, cron: Cron) -> Verb {
        Verb {
            name: name.into(),
            cron,
            doc: String::new(),
            source: None,
        }
    }

    pub fn doc(mut self, doc: impl Into<String>) -> Verb {
        self.doc = doc.into();
        self
    }

    pub fn source(mut self, file: impl Into<String>, line: u32) -> Verb {
        self.source = Some(Source {
            file: file.into(),
            line,
        });
        self
    }

    /// The name inside module `module`: without the `module::` prefix when it has one.
    pub fn name_in(&self, module: &str) -> &str {
        self.name
            .strip_prefix(module)
            .and_then(|rest| rest.strip_prefix("::"))
            .filter(|rest| !rest.is_empty())
            .unwrap_or(&self.name)
    }
}

impl Cron {
    /// An expression in UTC, with the runtime's default timeout, `missed = "once"`, no retry and
    /// `on = "one_replica"`.
    pub fn new(expression: impl Into<String>) -> Cron {
        Cron {
            expression: expression.into(),
            timezone: None,
            timeout: None,
            missed: MissedPolicy::Once,
            retries: 0,
            backoff: None,
            lease: None,
            on: RunOn::OneReplica,
            catch_up: None,
            jitter: None,
            expect_within: None,
            fixed: false,
        }
    }

    pub fn timezone(mut self, timezone: impl Into<String>) -> Cron {
        self.timezone = Some(timezone.into());
        self
    }

    pub fn timeout(mut self, timeout: impl Into<String>) -> Cron {
        self.timeout = Some(timeout.into());
        self
    }

    pub fn missed(mut self, missed: MissedPolicy) -> Cron {
        self.missed = missed;
        self
    }

    pub fn retries(mut self, retries: u32) -> Cron {
        self.retries = retries;
        self
    }

    pub fn backoff(mut self, backoff: impl Into<String>) -> Cron {
        self.backoff = Some(backoff.into());
        self
    }

    pub fn lease(mut self, lease: impl Into<String>) -> Cron {
        self.lease = Some(lease.into());
        self
    }

    pub fn on(mut self, on: RunOn) -> Cron {
        self.on = on;
        self
    }

    pub fn catch_up(mut self, catch_up: impl Into<String>) -> Cron {
        self.catch_up = Some(catch_up.into());
        self
    }

    pub fn jitter(mut self, jitter: impl Into<String>) -> Cron {
        self.jitter = Some(jitter.into());
        self
    }

    pub fn expect_within(mut self, within: impl Into<String>) -> Cron {
        self.expect_within = Some(within.into());
        self
    }

    pub fn fixed(mut self, fixed: bool) -> Cron {
        self.fixed = fixed;
        self
    }
}

/// The module of a verb whose function is in `module_path` (what `module_path!()` gives): the crate, its
/// first segment.
pub fn module_of(module_path: &str) -> &str {
    module_path.split("::").next().unwrap_or(module_path)
}
