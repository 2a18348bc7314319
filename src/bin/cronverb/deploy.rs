//! `cronverb deploy`: registers a deployment and its jobs ahead of a rollout, from a schema file.

use std::path::PathBuf;
use std::process::ExitCode;

use cron_schema::Schema;

use crate::db::{self, Connection, Failure};

/// Register a deployment and its jobs ahead of a rollout (it becomes active when its first replica runs)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The deployment's key: the version of the module (`billing@1.4.2+3f9a2c1d`)
    #[arg(long, value_name = "KEY")]
    deployment: String,
    /// The module to register when the schema has several
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
    /// The schema's JSON file (`cronverb schema extract --format json`), or `-` for standard input
    #[arg(value_name = "SCHEMA")]
    schema: PathBuf,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    // Read and check the file before connecting: a bad file is reported whatever the database does.
    let schema = match read(&args.schema) {
        Ok(schema) => schema,
        Err(failure) => {
            eprintln!("error: {}", crate::escape::escape(&failure.to_string()));
            return ExitCode::from(2);
        }
    };
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let deployed = store
            .deploy(&args.deployment, &schema, args.module.as_deref())
            .await?;
        if json {
            return db::print_json(&deployed);
        }
        let mut text = format!(
            "{} deployment `{}` of module `{}`",
            if deployed.created {
                "registered"
            } else {
                "already registered:"
            },
            deployed.key,
            deployed.module
        );
        text.push_str(if deployed.active {
            " (active)\n"
        } else {
            " (inactive until its first replica runs)\n"
        });
        let rows: Vec<Vec<String>> = deployed
            .jobs
            .iter()
            .map(|job| {
                vec![
                    job.verb.clone(),
                    job.expression.clone(),
                    job.timezone.clone(),
                    db::instant(job.next_execution),
                    match (job.added, job.matches) {
                        (true, _) => "added",
                        (false, true) => "unchanged",
                        (false, false) => "kept (the registered row differs from the file)",
                    }
                    .to_owned(),
                ]
            })
            .collect();
        text.push_str(&db::table(
            "  ",
            &["VERB", "SCHEDULE", "ZONE", "NEXT (UTC)", "ROW"],
            &rows,
        ));
        db::print(&text)
    })
}

fn read(path: &PathBuf) -> Result<Schema, Failure> {
    let shown = path.display();
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| {
            Failure::Invalid(format!("cannot read the schema from standard input: {e}"))
        })?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| Failure::Invalid(format!("cannot read `{shown}`: {e}")))?
    };
    Schema::from_json(&text)
        .map_err(|e| Failure::Invalid(format!("`{shown}` is not a valid cronverb schema: {e}")))
}
