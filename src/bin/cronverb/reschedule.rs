//! `cronverb reschedule`: run a verb on another schedule than its code's without a build, or on its
//! code's again with `--reset` (docs/operations.md, "Changing a schedule without a build").

use std::process::ExitCode;

use chrono_tz::Tz;
use cron_schema::Schedule;
use cronverb::admin::Rescheduled;

use crate::db::{self, Connection};
use crate::diagnostic;
use crate::escape::{escape, escape_lines};

/// Run a verb on another schedule than its code's, on every replica from its next occurrence and in
/// later deployments, until `--reset`
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("change").required(true).args(["expression", "reset"])))]
pub struct Args {
    #[command(flatten)]
    verb: db::Verb,
    /// The cron expression to run instead of the code's: 5, 6 or 7 fields (quote it), checked as
    /// `cronverb check` checks it
    #[arg(value_name = "EXPR")]
    expression: Option<String>,
    /// An IANA time zone the expression is read in, named by a place, such as `Europe/Berlin`
    /// [default: the code's zone of the verb]
    #[arg(short = 'z', long, value_name = "ZONE", value_parser = parse_zone, conflicts_with = "reset")]
    timezone: Option<Tz>,
    /// Run the code's schedule again, and forget the override
    #[arg(long)]
    reset: bool,
    /// Why, kept with the override and in the audit trail
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    // The same engine and the same caret as `cronverb check`, before the database is reached.
    if let Some(expression) = &args.expression
        && let Err(error) = Schedule::parse(expression)
    {
        let invalid = diagnostic::render(expression, &error);
        eprintln!("{}", escape_lines(&invalid.to_string()));
        return ExitCode::from(2);
    }
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let admin = store.admin();
        let (verb, module, note) = (args.verb.name(), args.verb.module(), args.note.as_deref());
        let done = match &args.expression {
            Some(expression) => {
                let zone = args.timezone.map(|zone| zone.name());
                admin
                    .reschedule(verb, module, expression, zone, note)
                    .await?
            }
            None => admin.reset_schedule(verb, module, note).await?,
        };
        show(&done, json)
    })
}

fn parse_zone(name: &str) -> Result<Tz, String> {
    cron_schema::parse_timezone(name).map_err(|error| error.to_string())
}

fn show(done: &Rescheduled, json: bool) -> Result<(), db::Failure> {
    if json {
        return db::print_json(done);
    }
    let verb = escape(&done.verb);
    let runs = format!(
        "`{}` in {}",
        escape(&done.expression),
        escape(&done.timezone)
    );
    let code = format!(
        "`{}` in {}",
        escape(&done.code_expression),
        escape(&done.code_timezone)
    );
    let mut text = match (done.overridden, done.changed) {
        (true, true) => format!("`{verb}` runs {runs} instead of its code's {code}\n"),
        (true, false) => format!("`{verb}` already ran {runs} instead of its code's {code}\n"),
        (false, true) => format!("`{verb}` runs its code's {code} again\n"),
        (false, false) => format!("`{verb}` runs its code's {code}\n"),
    };
    if done.next_execution.is_some() {
        text.push_str(&format!(
            "next run at {}\n",
            db::instant(done.next_execution)
        ));
    }
    db::print(&text)
}
