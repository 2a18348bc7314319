//! `cronverb`: the command-line tool.
//!
//! One module per subcommand. Exit status: 0 on success, 2 when what was typed is wrong (an invalid
//! expression, an unknown zone, a malformed instant, or a usage error reported by clap), 1 for any other
//! failure.

mod audit;
mod backfill;
mod cancel;
mod check;
mod dashboard;
mod db;
mod deploy;
mod diagnostic;
mod escape;
mod migrate;
mod next;
mod pause;
mod prune;
mod reschedule;
mod runs;
mod schedule_args;
mod schema;
mod simulate;
mod status;
mod trigger;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use diagnostic::InvalidInput;

#[derive(Debug, Parser)]
#[command(
    name = "cronverb",
    version,
    about = "Check cron expressions, and deploy, inspect, pause, resume, trigger, cancel, reschedule and backfill \
             the scheduled jobs of applications built with cronverb, and read who did; serve their dashboard"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Check(check::Args),
    Dashboard(dashboard::Args),
    Next(next::Args),
    Schema(schema::Args),
    Migrate(migrate::Args),
    Deploy(deploy::Args),
    Status(status::Args),
    Runs(runs::Args),
    Pause(pause::PauseArgs),
    Resume(pause::ResumeArgs),
    Trigger(trigger::Args),
    Cancel(cancel::Args),
    Reschedule(reschedule::Args),
    Backfill(backfill::Args),
    Prune(prune::Args),
    Audit(audit::Args),
    Simulate(simulate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Next(args) => next::run(args),
        // `schema diff` exits with 1 when the schemas differ, so `schema` chooses its own exit status.
        Command::Schema(args) => return schema::run(args),
        // The database commands share db.rs's exit statuses.
        Command::Migrate(args) => return migrate::run(args),
        Command::Deploy(args) => return deploy::run(args),
        Command::Status(args) => return status::run(args),
        Command::Runs(args) => return runs::run(args),
        Command::Pause(args) => return pause::pause(args),
        Command::Resume(args) => return pause::resume(args),
        Command::Trigger(args) => return trigger::run(args),
        Command::Cancel(args) => return cancel::run(args),
        Command::Reschedule(args) => return reschedule::run(args),
        Command::Backfill(args) => return backfill::run(args),
        Command::Prune(args) => return prune::run(args),
        Command::Audit(args) => return audit::run(args),
        Command::Dashboard(args) => return dashboard::run(args),
        Command::Simulate(args) => return simulate::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<InvalidInput>() {
            Some(invalid) => {
                eprintln!("{}", escape::escape_lines(&invalid.to_string()));
                ExitCode::from(2)
            }
            None => {
                eprintln!("error: {}", escape::escape_lines(&format!("{error:#}")));
                ExitCode::FAILURE
            }
        },
    }
}
