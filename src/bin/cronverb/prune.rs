//! `cronverb prune`: deletes old finished runs from the history.

use std::process::ExitCode;
use std::time::Duration;

use cronverb::admin::PRUNE_BATCH;

use crate::db::{self, Connection};

/// Delete the runs that finished longer ago than the retention (never a running one)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The age past which finished runs are deleted: `30d`, `12h`, `1d12h`
    #[arg(long, value_name = "AGE", default_value = "30d", value_parser = db::parse_age)]
    older_than: Duration,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        store.check_whole().await?;
        let deleted = store.admin().prune(args.older_than, PRUNE_BATCH).await?;
        if json {
            db::print_json(&serde_json::json!({
                "deleted": deleted,
                "older_than_secs": args.older_than.as_secs(),
            }))
        } else {
            db::print(&format!(
                "deleted {deleted} run{} finished more than {} ago\n",
                if deleted == 1 { "" } else { "s" },
                db::age(args.older_than)
            ))
        }
    })
}
