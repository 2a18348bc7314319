//! `cronverb runs`: the history of runs, latest first.

use std::process::ExitCode;

use cronverb::Attempt;
use cronverb::admin::{Run, RunFilter, Since};

use crate::db::{self, Connection};
use crate::escape::escape;

/// Show the history of runs, latest first
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this verb: its full name or its name in its module
    #[arg(long, value_name = "VERB")]
    verb: Option<String>,
    /// Only this module
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
    /// Only runs scheduled at or after this: an RFC 3339 instant, or an age such as `1h` or `2d`
    #[arg(long, value_name = "WHEN", value_parser = db::parse_since)]
    since: Option<Since>,
    /// At most this many runs (at least 1)
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    let filter = RunFilter {
        module: args.module,
        verb: args.verb,
        since: args.since,
        before: None,
        limit: args.limit,
    };
    db::run(&args.connection, |store| async move {
        let runs = store.admin().runs(&filter).await?;
        if json {
            db::print_json(&runs)
        } else if runs.is_empty() {
            db::print("no run\n")
        } else {
            let rows: Vec<Vec<String>> = runs.iter().map(row).collect();
            let table = db::table(
                "",
                &[
                    "ID",
                    "VERB",
                    "SCHEDULED (UTC)",
                    "LATENESS",
                    "OUTCOME",
                    "ATTEMPTS",
                    "DURATION",
                    "RUNNER",
                    "NOTES",
                ],
                &rows,
            );
            db::print(&with_attempts(&table, &runs))
        }
    })
}

/// `table` (a header line, then a line for each of `runs`) with, under each run tried more than once,
/// a line for each of its attempts.
fn with_attempts(table: &str, runs: &[Run]) -> String {
    let mut lines = table.lines();
    let mut text = String::with_capacity(table.len());
    for line in lines.by_ref().take(1) {
        text.push_str(line);
        text.push('\n');
    }
    for (line, run) in lines.zip(runs) {
        text.push_str(line);
        text.push('\n');
        for (number, attempt) in run.attempts.iter().enumerate() {
            text.push_str(&attempt_line(number + 1, attempt));
            text.push('\n');
        }
    }
    text
}

/// One attempt under its run: `  attempt 2  failed     2026-11-24T17:00:05Z  0.300s  boom`, its error's
/// first line escaped.
fn attempt_line(number: usize, attempt: &Attempt) -> String {
    let duration = attempt.started_at.map_or_else(
        || "-".to_owned(),
        |started| seconds((attempt.finished_at - started).num_milliseconds()),
    );
    let mut line = format!(
        "  attempt {number}  {:<9}  {}  {duration}",
        attempt.outcome.as_str(),
        db::instant(attempt.started_at.or(Some(attempt.finished_at))),
    );
    if let Some(error) = &attempt.error {
        line.push_str("  ");
        line.push_str(&escape(error.lines().next().unwrap_or_default()));
    }
    line
}

/// The ATTEMPTS cell: how many attempts the occurrence had (`1` when it ended at its first, or is at
/// its first), the one executing counted; `2+` while another is pending after two.
fn attempts(run: &Run) -> String {
    match (run.attempts.len(), run.outcome.as_str()) {
        (0, _) => "1".to_owned(),
        (n, "retrying") => format!("{n}+"),
        (n, "running") => (n + 1).to_string(),
        (n, _) => n.to_string(),
    }
}

fn row(run: &Run) -> Vec<String> {
    let duration = match (run.started_at, run.finished_at) {
        (Some(started), Some(finished)) => seconds((finished - started).num_milliseconds()),
        _ => "-".to_owned(),
    };
    // How late the handler started (docs/operations.md, "The tables").
    let lateness = run.lateness_ms.map_or_else(|| "-".to_owned(), seconds);
    let mut notes = Vec::new();
    if run.backfill {
        notes.push("backfill".to_owned());
    } else if run.manual {
        notes.push("manual".to_owned());
    }
    if run.late {
        notes.push("late".to_owned());
    }
    if run.skipped > 0 {
        notes.push(format!("skipped {}", run.skipped));
    }
    if let Some(at) = run.retry_at {
        notes.push(format!("retry at {}", db::instant(Some(at))));
    }
    if let Some(error) = &run.error {
        notes.push(error.lines().next().unwrap_or_default().to_owned());
    }
    vec![
        run.id.to_string(),
        run.verb.clone(),
        db::instant(Some(run.scheduled_at)),
        lateness,
        run.outcome.clone(),
        attempts(run),
        duration,
        run.runner.clone(),
        notes.join("; "),
    ]
}

/// Milliseconds as seconds, to the millisecond: `0.300s`.
fn seconds(ms: i64) -> String {
    format!("{:.3}s", ms as f64 / 1000.0)
}
