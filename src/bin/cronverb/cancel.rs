//! `cronverb cancel`: ask the run of a verb in flight to stop (docs/operations.md, "Cancelling a run").

use std::process::ExitCode;

use cronverb::admin::Cancelled;

use crate::db::{self, Connection};
use crate::escape::escape;

/// Cancel the run of a verb in flight: its handler is told at once and dropped after the shutdown
/// grace period; the run is recorded cancelled, by you, and not retried
///
/// An occurrence waiting for its retry is recorded cancelled at once. Refused (exit status 1) when no
/// run of the verb is in flight nor waits for its retry.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    verb: db::Verb,
    /// Why it is cancelled: kept with the run's error and in the audit trail
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let cancelled = store
            .admin()
            .cancel(args.verb.name(), args.verb.module(), args.note.as_deref())
            .await?;
        if json {
            db::print_json(&cancelled)
        } else {
            db::print(&text(&cancelled))
        }
    })
}

fn text(cancelled: &Cancelled) -> String {
    let verb = escape(&cancelled.verb);
    let by = escape(&cancelled.requested_by);
    let mut text = if cancelled.already_requested {
        format!(
            "run {} of `{verb}` was already asked to stop, by {by} at {}",
            cancelled.run_id,
            db::instant(Some(cancelled.requested_at))
        )
    } else if cancelled.ended {
        format!(
            "run {} of `{verb}` was waiting for its retry: it is recorded `cancelled` by {by}, with \
             no more retries",
            cancelled.run_id
        )
    } else {
        format!(
            "asked run {} of `{verb}` to stop: it ends `cancelled` by {by}",
            cancelled.run_id
        )
    };
    if let Some(note) = &cancelled.note {
        text.push_str(&format!(": {}", escape(note)));
    }
    text.push('\n');
    text
}
