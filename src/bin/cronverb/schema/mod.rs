//! `cronverb schema`: the schema of an application's jobs, extracted from its sources, and the differences
//! between two schemas. The forms are described in `docs/schema.md`.

mod diff;
mod extract;
mod source;

use std::fmt;
use std::process::ExitCode;

/// Extract the schema of a package's `#[cron]` jobs from its sources, or compare two schemas
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    Extract(extract::Args),
    Diff(diff::Args),
}

/// The form a schema or a diff is printed in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people
    #[default]
    Text,
    /// For tools: a JSON document
    Json,
}

/// Why a subcommand failed, and the exit status that says so.
#[derive(Debug)]
pub enum Failure {
    /// What was given is wrong: an invalid `#[cron]`, a missing or unreadable file, a file that is not a
    /// schema. Exit status 2.
    Invalid(String),
    /// Anything else (cargo failed, standard output is closed). Exit status 1.
    Other(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Invalid(message) | Failure::Other(message) => f.write_str(message),
        }
    }
}

/// Runs `cronverb schema …`. `extract` exits with 0, or 2 when the sources are invalid; `diff` exits with
/// 0 when the schemas are equal and 1 when they differ. Any error exits with 2 when what was given is
/// wrong, 1 otherwise, after printing `error: …` on standard error.
pub fn run(args: Args) -> ExitCode {
    let result = match args.command {
        Command::Extract(args) => extract::run(args).map(|()| ExitCode::SUCCESS),
        Command::Diff(args) => diff::run(args),
    };
    result.unwrap_or_else(|failure| {
        eprintln!("{}", crate::escape::escape_lines(&failure.to_string()));
        match failure {
            Failure::Invalid(_) => ExitCode::from(2),
            Failure::Other(_) => ExitCode::FAILURE,
        }
    })
}

/// Writes `text` to standard output.
fn print(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|error| {
            Failure::Other(format!("error: while writing to standard output: {error}"))
        })
}
