//! `cronverb schema diff`: the verbs added, removed and changed between two schemas; given a database,
//! also the schedule overrides stored there and what runs of each after a deploy of the new schema
//! (docs/operations.md, "Changing a schedule without a build").

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cron_schema::{Cron, Schema};
use cronverb::admin::{AdminError, AfterDeploy, StoredOverride, check_verbs_listed_once};
use serde::Serialize;

use super::{Failure, Format, print};
use crate::db;
use crate::escape::escape;

/// Compare two schemas (JSON or text); exit 0 when they are equal, 1 when they differ, 2 on error
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The schema before
    #[arg(value_name = "OLD")]
    old: PathBuf,

    /// The schema after
    #[arg(value_name = "NEW")]
    new: PathBuf,

    /// How to print the differences
    #[arg(long, value_enum, default_value_t)]
    format: Format,

    /// A database whose schedule overrides to compare too: a PostgreSQL URL or a SQLite file
    /// (`sqlite://path/to/cron.db`); each overridden verb of the schemas' modules is shown with what
    /// runs after a deploy of NEW
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let old = read(&args.old)?;
    let new = read(&args.new)?;
    let diff = old.diff(&new);
    if let Some(url) = &args.database_url {
        return Ok(with_overrides(url, args.format, &old, &new, &diff));
    }
    match args.format {
        Format::Text => print(&diff.to_string())?,
        Format::Json => {
            let mut json = serde_json::to_string_pretty(&diff)
                .map_err(|error| Failure::Other(format!("error: {error}")))?;
            json.push('\n');
            print(&json)?;
        }
    }
    Ok(if diff.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn read(path: &Path) -> Result<Schema, Failure> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Failure::Invalid(format!(
            "error: cannot read schema file `{}`: {error}",
            path.display()
        ))
    })?;
    let schema = Schema::from_json_or_text(&text).map_err(|error| {
        let what = if text.trim_start().starts_with('{') {
            "is not a valid cronverb schema"
        } else {
            "is not JSON, nor a cronverb schema in the text form"
        };
        Failure::Invalid(format!("error: `{}` {what}: {error}", path.display()))
    })?;
    // Which of two entries of a verb is meant cannot be said: `deploy` refuses the schema, and so does
    // the diff, with `deploy`'s message.
    check_verbs_listed_once(&schema).map_err(|error| {
        let reason = match error {
            AdminError::InvalidSchema(reason) => reason,
            error => error.to_string(),
        };
        Failure::Invalid(format!(
            "error: `{}` is not a valid cronverb schema: {reason}",
            path.display()
        ))
    })?;
    Ok(schema)
}

/// The diff and the overrides stored at `url` of the schemas' modules, each with what runs after a
/// deploy of `new`; exits as the diff does (0 equal, 1 different), or 2 when the database fails: a
/// failure is not a difference.
fn with_overrides(
    url: &str,
    format: Format,
    old: &Schema,
    new: &Schema,
    diff: &cron_schema::Diff,
) -> ExitCode {
    let connection = db::Connection::to(url);
    db::run_answering(&connection, |store| async move {
        let stored = store.admin().overrides().await?;
        let drift: Vec<Drift<'_>> = stored
            .iter()
            .filter(|over| module_has(old, &over.module) || module_has(new, &over.module))
            .map(|over| Drift::of(over, old, new))
            .collect();
        match format {
            Format::Text => {
                let mut text = diff.to_string();
                if !drift.is_empty() {
                    text.push_str("schedule overrides in the database:\n");
                    for drift in &drift {
                        text.push_str(&format!("  {}\n", drift.line()));
                    }
                }
                db::print(&text)?;
            }
            Format::Json => {
                let mut json = serde_json::to_value(diff)
                    .map_err(|error| db::Failure::Other(format!("while writing JSON: {error}")))?;
                json["overrides"] = serde_json::to_value(&drift)
                    .map_err(|error| db::Failure::Other(format!("while writing JSON: {error}")))?;
                db::print_json(&json)?;
            }
        }
        if diff.is_empty() {
            Ok(())
        } else {
            Err(db::Failure::Status(1, None))
        }
    })
}

fn module_has(schema: &Schema, module: &str) -> bool {
    schema.modules.iter().any(|m| m.name == module)
}

/// The code of `verb` of `module` in `schema`, if it has it.
fn code_of<'a>(schema: &'a Schema, module: &str, verb: &str) -> Option<&'a Cron> {
    schema
        .modules
        .iter()
        .filter(|m| m.name == module)
        .flat_map(|m| &m.verbs)
        .find(|v| v.name == verb)
        .map(|v| &v.cron)
}

/// An expression and its zone, as the drift shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Code {
    expression: String,
    timezone: String,
}

impl Code {
    fn of(cron: &Cron) -> Code {
        Code {
            expression: cron.expression.clone(),
            timezone: cron.timezone.clone().unwrap_or_else(|| "UTC".to_owned()),
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` in {}",
            escape(&self.expression),
            escape(&self.timezone)
        )
    }
}

/// An override stored in the database, the code's schedule of its verb in each schema, and what runs
/// after a deploy of the new one (the rule of "What wins").
#[derive(Debug, Serialize)]
struct Drift<'a> {
    #[serde(flatten)]
    over: &'a StoredOverride,
    /// The old schema's code (`null`: it has no such verb).
    code_before: Option<Code>,
    /// The new schema's code (`null`: it has no such verb).
    code_after: Option<Code>,
    /// What runs after the deploy: `override`, `code`, `code_drops_override`, `removed` or
    /// `module_not_deployed`.
    after_deploy: AfterDeploy,
    /// The schedule that runs after the deploy (`null`: no row of the verb).
    runs: Option<Code>,
}

impl<'a> Drift<'a> {
    fn of(over: &'a StoredOverride, old: &Schema, new: &Schema) -> Drift<'a> {
        let before = code_of(old, &over.module, &over.verb);
        let after = code_of(new, &over.module, &over.verb);
        let after_deploy = if module_has(new, &over.module) {
            over.after_deploy(after)
        } else {
            AfterDeploy::ModuleNotDeployed
        };
        let runs = match after_deploy {
            AfterDeploy::Override | AfterDeploy::ModuleNotDeployed => Some(Code {
                expression: over.expression.clone(),
                timezone: over.timezone.clone(),
            }),
            AfterDeploy::Code | AfterDeploy::CodeDropsOverride => after.map(Code::of),
            AfterDeploy::Removed => None,
        };
        Drift {
            over,
            code_before: before.map(Code::of),
            code_after: after.map(Code::of),
            after_deploy,
            runs,
        }
    }

    /// One line for people: the override, who set it, the code's schedule before and after, and what
    /// runs after the deploy.
    fn line(&self) -> String {
        let verb = escape(&self.over.verb);
        let over = Code {
            expression: self.over.expression.clone(),
            timezone: self.over.timezone.clone(),
        };
        let note = self
            .over
            .note
            .as_deref()
            .map(|note| format!(": {}", escape(note)))
            .unwrap_or_default();
        let code = match (&self.code_before, &self.code_after) {
            (Some(before), Some(after)) if before == after => {
                format!("its code's schedule is unchanged, {after}")
            }
            (Some(before), Some(after)) => format!("its code changes from {before} to {after}"),
            (None, Some(after)) => format!("the new code adds it at {after}"),
            (Some(before), None) => format!("the new code removes it (it declared {before})"),
            (None, None) => "neither code has it".to_owned(),
        };
        let runs = match (self.after_deploy, &self.runs) {
            (AfterDeploy::Override, _) => format!(
                "after the deploy the override {over} still runs, until `cronverb reschedule {verb} --reset`"
            ),
            (AfterDeploy::CodeDropsOverride, Some(runs)) => format!(
                "the new code declares it `fixed`: the deploy drops the override and its code's {runs} runs"
            ),
            (AfterDeploy::ModuleNotDeployed, _) => format!(
                "the new schema has no module `{}`: its deploy leaves it as it is, and the override \
                 {over} still runs",
                escape(&self.over.module)
            ),
            (AfterDeploy::Removed, _) => "the new code has no such verb: the deploy's takeover \
                                          drops the override, and no row of it runs"
                .to_owned(),
            (_, Some(runs)) => format!("after the deploy its code's {runs} runs"),
            (_, None) => "after the deploy no row of it runs".to_owned(),
        };
        format!(
            "`{verb}` is overridden to {over} (set by {} at {}{note}); {code}; {runs}",
            escape(&self.over.by),
            db::instant(Some(self.over.at)),
        )
    }
}
