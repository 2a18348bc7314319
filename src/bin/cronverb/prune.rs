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
    /// Also delete the audit trail's rows older than this (`90d`); without it the audit trail is kept
    #[arg(long, value_name = "AGE", value_parser = db::parse_age)]
    audit_older_than: Option<Duration>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        store.check_whole().await?;
        let admin = store.admin();
        let deleted = admin.prune(args.older_than, PRUNE_BATCH).await?;
        let audit_deleted = match args.audit_older_than {
            Some(age) => Some(admin.prune_audit(age).await?),
            None => None,
        };
        if json {
            db::print_json(&serde_json::json!({
                "deleted": deleted,
                "older_than_secs": args.older_than.as_secs(),
                "audit_deleted": audit_deleted,
                "audit_older_than_secs": args.audit_older_than.map(|age| age.as_secs()),
            }))
        } else {
            let mut text = format!(
                "deleted {deleted} run{} finished more than {} ago\n",
                if deleted == 1 { "" } else { "s" },
                db::age(args.older_than)
            );
            if let (Some(n), Some(age)) = (audit_deleted, args.audit_older_than) {
                text.push_str(&format!(
                    "deleted {n} audit row{} written more than {} ago\n",
                    if n == 1 { "" } else { "s" },
                    db::age(age)
                ));
            }
            db::print(&text)
        }
    })
}
