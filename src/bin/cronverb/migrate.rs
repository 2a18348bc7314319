//! `cronverb migrate`: creates or upgrades cronverb's tables with the runtime's own embedded migrations.

use std::process::ExitCode;

use crate::db::{self, Connection};

/// Create or upgrade cronverb's tables (the migrations the runtime embeds)
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run_creating(&args.connection, |store| async move {
        store.migrate().await?;
        let migrator = store.migrator();
        let latest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        if json {
            db::print_json(&serde_json::json!({
                "migrated": true,
                "version": latest,
                "migrations": migrator
                    .iter()
                    .map(|m| serde_json::json!({ "version": m.version, "description": m.description }))
                    .collect::<Vec<_>>(),
            }))
        } else {
            db::print(&format!(
                "cronverb's tables are up to date (migration {latest:04})\n"
            ))
        }
    })
}
