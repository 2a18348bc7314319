//! `cronverb simulate`: what an outage would do to each job when the application comes back, by its
//! missed-run policy and catch-up window, with the rules the stores use (`cronverb::simulate`); nothing is
//! written (docs/operations.md, "Simulating an outage").

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::Schema;
use cronverb::simulate::{Event, JobOutage, Outage};

use crate::db::{self, Connection, Failure};
use crate::escape::escape;
use crate::schedule_args::{format_utc, parse_instant};

/// Show, per job, which missed occurrences would run (and when) and which would be skipped after the
/// application is down from FROM to TO, by each job's missed-run policy and catch-up window
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The outage: down from FROM to TO, two RFC 3339 instants such as `2026-03-08T07:00:00Z`
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"], value_parser = parse_instant, required = true)]
    down: Vec<DateTime<Utc>>,
    /// When the first replica is back [default: TO]
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant)]
    up_at: Option<DateTime<Utc>>,
    /// The runtime's missed-run tolerance, in seconds (at least 1, as the runtime takes)
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    tolerance: u64,
    /// A schema in JSON (`cronverb schema extract --format json`, or the application's); without it, the
    /// active deployments' schemas in the database
    #[arg(value_name = "SCHEMA.json")]
    schema: Option<PathBuf>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let [from, to] = args.down[..] else {
        unreachable!("clap takes two values")
    };
    if to < from {
        eprintln!(
            "error: the outage ends ({}) before it starts ({})",
            format_utc(to),
            format_utc(from)
        );
        return ExitCode::from(2);
    }
    let outage = Outage {
        from,
        to,
        up_at: args.up_at.unwrap_or(to).max(to),
        tolerance: Duration::from_secs(args.tolerance),
    };
    let json = args.connection.json;
    let Some(path) = &args.schema else {
        return db::run(&args.connection, |store| async move {
            let admin = store.admin();
            let status = admin.status(None).await?;
            let mut verbs = Vec::new();
            for module in status.modules {
                let Some(key) = module.active_deployment else {
                    continue;
                };
                if let Some(deployment) = admin.deployment(&key).await? {
                    verbs.extend(
                        deployment
                            .schema
                            .verbs()
                            .map(|(module, verb)| (module.name.clone(), verb.clone()))
                            .collect::<Vec<_>>(),
                    );
                }
            }
            report(&Schema::new(verbs), &outage, json)
        });
    };
    let schema = match std::fs::read_to_string(path)
        .map_err(|error| error.to_string())
        .and_then(|text| Schema::from_json(&text).map_err(|error| error.to_string()))
    {
        Ok(schema) => schema,
        Err(error) => {
            eprintln!(
                "error: while reading {}: {}",
                escape(&path.display().to_string()),
                escape(&error)
            );
            return ExitCode::from(2);
        }
    };
    match report(&schema, &outage, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::FAILURE
        }
    }
}

fn report(schema: &Schema, outage: &Outage, json: bool) -> Result<(), Failure> {
    let jobs = cronverb::simulate::outage(schema, outage);
    if json {
        db::print_json(&jobs)
    } else {
        db::print(&render(&jobs, outage))
    }
}

fn render(jobs: &[JobOutage], outage: &Outage) -> String {
    let mut text = format!(
        "down from {} to {}, back at {}\n",
        format_utc(outage.from),
        format_utc(outage.to),
        format_utc(outage.up_at)
    );
    if jobs.is_empty() {
        text.push_str("no jobs\n");
    }
    for job in jobs {
        let window = match job.catch_up_secs {
            Some(secs) => format!(
                " catch_up={}",
                cron_schema::format_duration(Duration::from_secs(secs))
            ),
            None => String::new(),
        };
        let window = match job.jitter_offset_ms {
            0 => window,
            offset => format!(
                "{window} jitter offset={}",
                crate::status::offset_text(offset)
            ),
        };
        text.push_str(&format!(
            "\n{} {} (missed={}{window})\n",
            escape(&job.module),
            escape(&job.verb),
            job.missed
        ));
        if let Some(note) = &job.note {
            text.push_str(&format!("  {}\n", escape(note)));
            continue;
        }
        if job.events.is_empty() {
            text.push_str("  nothing missed\n");
        }
        for event in &job.events {
            match event {
                Event::Run {
                    scheduled_at,
                    at,
                    late,
                } => text.push_str(&format!(
                    "  run   {} at {}{}\n",
                    format_utc(*scheduled_at),
                    format_utc(*at),
                    if *late { " (late)" } else { "" }
                )),
                Event::Skipped { first, count } => text.push_str(&format!(
                    "  skip  {} occurrence{} from {}\n",
                    count,
                    if *count == 1 { "" } else { "s" },
                    format_utc(*first)
                )),
            }
        }
        match job.next {
            Some(next) => text.push_str(&format!("  next  {}\n", format_utc(next))),
            None => text.push_str("  next  none\n"),
        }
    }
    text
}
