//! `cronverb schema diff`: the verbs added, removed and changed between two schemas.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cron_schema::Schema;
use cronverb::admin::{AdminError, check_verbs_listed_once};

use super::{Failure, Format, print};

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
}

pub fn run(args: Args) -> Result<ExitCode, Failure> {
    let old = read(&args.old)?;
    let new = read(&args.new)?;
    let diff = old.diff(&new);
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
