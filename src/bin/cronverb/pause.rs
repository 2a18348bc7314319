//! `cronverb pause` and `cronverb resume`: stop and restart a verb's regular runs.

use std::process::ExitCode;

use cronverb::admin::Pause;

use crate::db::{self, Connection};
use crate::escape::escape;

/// Pause a verb: its regular occurrences are not run until it is resumed, across deploys
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    #[command(flatten)]
    verb: db::Verb,
    /// Why it is paused, shown by `cronverb status`
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

/// Resume a paused verb from its next occurrence after now
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    verb: db::Verb,
    #[command(flatten)]
    connection: Connection,
}

pub fn pause(args: PauseArgs) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let pause = store
            .admin()
            .pause(args.verb.name(), args.verb.module(), args.note.as_deref())
            .await?;
        show(&pause, json)
    })
}

pub fn resume(args: ResumeArgs) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let pause = store
            .admin()
            .resume(args.verb.name(), args.verb.module())
            .await?;
        show(&pause, json)
    })
}

fn show(pause: &Pause, json: bool) -> Result<(), db::Failure> {
    if json {
        return db::print_json(pause);
    }
    let verb = escape(&pause.verb);
    let mut text = match (pause.paused, pause.changed) {
        (true, true) => format!("paused `{verb}`"),
        (true, false) => format!("`{verb}` was already paused"),
        (false, true) => format!("resumed `{verb}`"),
        (false, false) => format!("`{verb}` was not paused"),
    };
    if let Some(note) = &pause.note {
        text.push_str(&format!(": {}", escape(note)));
    }
    text.push('\n');
    if !pause.paused && pause.next_execution.is_some() {
        text.push_str(&format!(
            "next run at {}\n",
            db::instant(pause.next_execution)
        ));
    }
    db::print(&text)
}
