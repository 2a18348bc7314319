//! `cronverb audit`: the audit trail of operator actions, newest first (docs/operations.md, "Audit
//! trail").

use std::process::ExitCode;

use cronverb::admin::{AUDIT_LIMIT, AuditEntry, AuditFilter, Since};

use crate::db::{self, Connection};

/// Show who deployed, paused, resumed, triggered, backfilled or pruned, newest first
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the actions on this verb: its full name or its name in its module
    #[arg(long, value_name = "VERB")]
    verb: Option<String>,
    /// Only the actions on this module
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
    /// Only the actions since this RFC 3339 instant or of this last span: `7d`, `12h`, `1d12h`
    #[arg(long, value_name = "WHEN", value_parser = db::parse_since)]
    since: Option<Since>,
    /// At most this many actions (at least 1)
    #[arg(long, value_name = "N", default_value_t = AUDIT_LIMIT, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    let filter = AuditFilter {
        verb: args.verb,
        module: args.module,
        since: args.since,
        limit: args.limit,
    };
    db::run(&args.connection, |store| async move {
        let entries = store.admin().audit(&filter).await?;
        if json {
            db::print_json(&entries)
        } else if entries.is_empty() {
            db::print("no action recorded\n")
        } else {
            let rows: Vec<Vec<String>> = entries.iter().map(row).collect();
            db::print(&db::table(
                "",
                &[
                    "AT (UTC)", "ACTOR", "FROM", "ACTION", "MODULE", "VERB", "CHANGE", "NOTE",
                ],
                &rows,
            ))
        }
    })
}

/// One action as a row of the table: its cells are escaped by [`db::table`].
fn row(entry: &AuditEntry) -> Vec<String> {
    let from = match &entry.host {
        Some(host) => format!("{}@{host}", entry.origin),
        None => entry.origin.clone(),
    };
    vec![
        db::instant(Some(entry.at)),
        entry.actor.clone(),
        from,
        entry.action.clone(),
        entry.module.clone().unwrap_or_else(|| "-".to_owned()),
        entry.verb.clone().unwrap_or_else(|| "-".to_owned()),
        change(entry),
        entry.note.clone().unwrap_or_default(),
    ]
}

/// What the action changed, as `before -> after` (each compact JSON), or the state after it alone.
fn change(entry: &AuditEntry) -> String {
    match (&entry.before, &entry.after) {
        (Some(before), Some(after)) if before == after => format!("{after} (unchanged)"),
        (Some(before), Some(after)) => format!("{before} -> {after}"),
        (None, Some(after)) => after.to_string(),
        (Some(before), None) => format!("{before} -> -"),
        (None, None) => "-".to_owned(),
    }
}
