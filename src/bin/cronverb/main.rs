//! `cronverb`: the command-line tool.
//!
//! One module per subcommand. Exit status: 0 on success, 2 when what was typed is wrong (an invalid
//! expression, an unknown zone, a malformed instant, or a usage error reported by clap), 1 for any other
//! failure.

mod check;
mod diagnostic;
mod next;
mod schedule_args;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use diagnostic::InvalidInput;

#[derive(Debug, Parser)]
#[command(
    name = "cronverb",
    version,
    about = "Check cron expressions and list their occurrences"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Check(check::Args),
    Next(next::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Next(args) => next::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<InvalidInput>() {
            Some(invalid) => {
                eprintln!("{invalid}");
                ExitCode::from(2)
            }
            None => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        },
    }
}
