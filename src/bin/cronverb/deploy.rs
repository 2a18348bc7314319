//! `cronverb deploy`: registers a deployment and its jobs ahead of a rollout, from a schema file.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use cronverb::admin::{Deployed, DropReason};
use cronverb::{MAX_JOBS_PER_DEPLOYMENT, Schema};

use crate::db::{self, Connection, Failure};
use crate::escape::escape;

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
    let schema = match read(&args.schema).and_then(|schema| check_size(schema, &args)) {
        Ok(schema) => schema,
        Err(failure) => {
            eprintln!("error: {}", crate::escape::escape(&failure.to_string()));
            return ExitCode::from(2);
        }
    };
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let deployed = store
            .admin()
            .deploy(&args.deployment, &schema, args.module.as_deref())
            .await?;
        if json {
            return db::print_json(&deployed);
        }
        db::print(&text(&deployed))
    })
}

/// Refuses, before connecting, a module with more verbs than a deployment may have: a file too large
/// is reported whatever the database does (the operator API refuses it too, once connected).
fn check_size(schema: Schema, args: &Args) -> Result<Schema, Failure> {
    for module in &schema.modules {
        let jobs = module.verbs.len();
        if jobs > MAX_JOBS_PER_DEPLOYMENT
            && args
                .module
                .as_deref()
                .is_none_or(|name| name == module.name)
        {
            return Err(Failure::Invalid(format!(
                "invalid schema: module `{}` has {jobs} jobs, more than the \
                 {MAX_JOBS_PER_DEPLOYMENT} a deployment may have (docs/operations.md): split them \
                 into several modules",
                module.name
            )));
        }
    }
    Ok(schema)
}

/// The deployment, what it changes relative to the module's active deployment, and its rows.
fn text(deployed: &Deployed) -> String {
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
    match &deployed.changes {
        Some(changes) => {
            match &changes.compared_with {
                Some(key) => text.push_str(&format!(
                    "against the active deployment `{key}`: {} added, {} removed, {} changed, {} \
                     unchanged\n",
                    changes.added.len(),
                    changes.removed.len(),
                    changes.changed.len(),
                    changes.unchanged
                )),
                None => text.push_str(&format!(
                    "module `{}` has no active deployment: {} added\n",
                    deployed.module,
                    changes.added.len()
                )),
            };
        }
        None => text.push_str(
            "the active deployment's registered schema cannot be read: no comparison with it\n",
        ),
    }
    let changed: HashMap<&str, String> = deployed
        .changes
        .iter()
        .flat_map(|changes| &changes.changed)
        .map(|c| {
            let fields: Vec<String> = c.changes.iter().map(|c| c.to_string()).collect();
            (c.verb.as_str(), format!("changed: {}", fields.join(", ")))
        })
        .collect();
    let mut rows: Vec<Vec<String>> = deployed
        .jobs
        .iter()
        .map(|job| {
            let mut change = match job.change {
                Some("changed") => changed
                    .get(job.verb.as_str())
                    .cloned()
                    .unwrap_or_else(|| "changed".to_owned()),
                Some(change) => change.to_owned(),
                None => "-".to_owned(),
            };
            if !job.matches {
                change.push_str(" (the registered row differs from the file)");
            }
            vec![
                job.verb.clone(),
                job.expression.clone(),
                job.timezone.clone(),
                if job.every_replica {
                    // Never claimed: each replica runs it at its own occurrences.
                    "every replica".to_owned()
                } else {
                    db::instant(job.next_execution)
                },
                change,
            ]
        })
        .collect();
    for removed in deployed.changes.iter().flat_map(|c| &c.removed) {
        rows.push(vec![
            removed.verb.clone(),
            removed.expression.clone(),
            removed.timezone.clone(),
            db::instant(None),
            "removed".to_owned(),
        ]);
    }
    text.push_str(&db::table(
        "  ",
        &["VERB", "SCHEDULE", "ZONE", "NEXT (UTC)", "CHANGE"],
        &rows,
    ));
    // The drift: what the file says, and the override that runs instead until it is reset.
    for job in &deployed.jobs {
        if let (Some(expression), Some(zone)) = (&job.code_expression, &job.code_timezone) {
            let verb = escape(&job.verb);
            text.push_str(&format!(
                "  `{verb}`: the code now says `{}` in {}; the override `{}` in {} still runs until \
                 `cronverb reschedule {verb} --reset`\n",
                escape(expression),
                escape(zone),
                escape(&job.expression),
                escape(&job.timezone),
            ));
        }
    }
    // The overrides this deployment drops: its code declares the verb `fixed`, and the code wins; or
    // its code has no such verb, and the override goes with it at the takeover (docs/operations.md,
    // "Changing a schedule without a build").
    for dropped in &deployed.dropped_overrides {
        let (verb, expression, zone) = (
            escape(&dropped.verb),
            escape(&dropped.expression),
            escape(&dropped.timezone),
        );
        text.push_str(&match dropped.reason {
            DropReason::Fixed => format!(
                "  `{verb}`: the code declares it `fixed`: the override `{expression}` in {zone} is \
                 dropped, and the code's schedule runs from this deployment's takeover\n"
            ),
            DropReason::Removed => format!(
                "  `{verb}`: the code has no such verb: the override `{expression}` in {zone} is \
                 dropped at this deployment's takeover (a rollback before it still runs it)\n"
            ),
        });
    }
    text
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
