//! `cronverb trigger`: one run of a verb now, through the replicas' claim.

use std::process::ExitCode;

use crate::db::{self, Connection};
use crate::escape::escape;

/// Run a verb once now, through the normal claim (recorded as manual; refused while it is executing)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The verb: its full name (`billing::send_invoices`) or its name in its module
    #[arg(value_name = "VERB")]
    verb: String,
    /// The verb's module, when its name is in several
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let triggered = store
            .admin()
            .trigger(&args.verb, args.module.as_deref())
            .await?;
        if json {
            return db::print_json(&triggered);
        }
        let mut text = if triggered.already_pending {
            format!(
                "a trigger of `{}` is already pending since {}\n",
                escape(&triggered.verb),
                db::instant(Some(triggered.requested_at))
            )
        } else {
            format!(
                "triggered `{}` of deployment `{}` at {}\n",
                escape(&triggered.verb),
                escape(&triggered.deployment),
                db::instant(Some(triggered.requested_at))
            )
        };
        if triggered.live_replicas == 0 {
            text.push_str("no replica of the deployment is alive: the run starts when one is\n");
        }
        db::print(&text)
    })
}
