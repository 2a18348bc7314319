//! `cronverb backfill`: queue the occurrences of a verb's schedule in a window that never ran, for the
//! replicas to run in order, one at a time, recorded as backfills; or cancel what is queued
//! (docs/operations.md, "Backfill").

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use cronverb::admin::{BackfillCancelled, Backfilled};

use crate::db::{self, Connection, Failure};
use crate::escape::escape;

/// How many occurrences the text lists before it says how many more there are.
const LISTED: usize = 10;

/// Run the occurrences of a verb's schedule in [--from, --to) that never ran, in order, one at a time
///
/// The occurrences that have no recorded run are queued in the store; the replicas run them through
/// their normal claim, each recorded with its own scheduled instant and marked as a backfill, never
/// beside the job's regular runs (a regular occurrence that is due runs first). Running the same
/// backfill again queues nothing. `status` shows what is left; `--cancel` drops it. A window of more
/// than 100,000 occurrences (the per-deployment job limit) is refused. Exit status: 1 when the
/// database fails or refuses the backfill, 2 when what was given is wrong.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    verb: db::Verb,
    /// The window's start, included: an RFC 3339 instant (`2026-03-01T00:00:00Z`)
    #[arg(long, value_name = "T1", value_parser = parse_instant, required_unless_present = "cancel")]
    from: Option<DateTime<Utc>>,
    /// The window's end, excluded: an RFC 3339 instant
    #[arg(long, value_name = "T2", value_parser = parse_instant, required_unless_present = "cancel")]
    to: Option<DateTime<Utc>>,
    /// Say what would be queued, and queue nothing
    #[arg(long, conflicts_with = "cancel")]
    dry_run: bool,
    /// Drop the verb's queued occurrences that have not started (a run in flight goes on)
    #[arg(long, conflicts_with_all = ["from", "to"])]
    cancel: bool,
    #[command(flatten)]
    connection: Connection,
}

fn parse_instant(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|instant| instant.with_timezone(&Utc))
        .map_err(|error| {
            format!("{error}; expected an RFC 3339 instant such as `2026-03-01T00:00:00Z`")
        })
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let admin = store.admin();
        if args.cancel {
            let cancelled = admin
                .cancel_backfill(args.verb.name(), args.verb.module())
                .await?;
            return if json {
                db::print_json(&cancelled)
            } else {
                db::print(&cancelled_text(&cancelled))
            };
        }
        let (Some(from), Some(to)) = (args.from, args.to) else {
            return Err(Failure::Invalid(
                "`--from` and `--to` are required unless `--cancel` is given".to_owned(),
            ));
        };
        let backfilled = admin
            .backfill(args.verb.name(), args.verb.module(), from, to, args.dry_run)
            .await?;
        if json {
            db::print_json(&backfilled)
        } else {
            db::print(&backfilled_text(&backfilled))
        }
    })
}

/// What a backfill queued, for people.
fn backfilled_text(done: &Backfilled) -> String {
    let verb = escape(&done.verb);
    let queued = done.queued.len();
    let mut text = if done.dry_run {
        format!(
            "would backfill {queued} occurrence(s) of `{verb}` from {} to {} (dry run: nothing \
             queued)\n",
            db::instant(Some(done.from)),
            db::instant(Some(done.to)),
        )
    } else {
        format!(
            "backfilling {queued} occurrence(s) of `{verb}` of deployment `{}` from {} to {}\n",
            escape(&done.deployment),
            db::instant(Some(done.from)),
            db::instant(Some(done.to)),
        )
    };
    text.push_str(&format!(
        "{} occurrence(s) in the window: {} ran already, {} queued already\n",
        done.occurrences, done.already_ran, done.already_queued
    ));
    for occurrence in done.queued.iter().take(LISTED) {
        text.push_str(&format!(
            "  {}\n",
            db::instant(Some(occurrence.scheduled_at))
        ));
    }
    if queued > LISTED {
        text.push_str(&format!("  … and {} more\n", queued - LISTED));
    }
    if !done.dry_run && queued > 0 && done.live_replicas == 0 {
        text.push_str("no replica of the deployment is alive: the backfill starts when one is\n");
    }
    text
}

/// What a cancel dropped, for people.
fn cancelled_text(cancelled: &BackfillCancelled) -> String {
    format!(
        "cancelled the backfill of `{}`: {} queued occurrence(s) dropped\n",
        escape(&cancelled.verb),
        cancelled.cancelled
    )
}
