//! `cronverb status`: modules, their deployments and replicas, and their jobs.

use std::process::ExitCode;
use std::time::Duration;

use cronverb::admin::{JobStatus, ModuleStatus, ScheduleOverride, Status};

use crate::db::{self, Connection};
use crate::escape::escape;

/// List modules, deployments (active, live replicas), their replicas and jobs (schedule, state, next
/// run, last outcome)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this module
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let status = store.admin().status(args.module.as_deref()).await?;
        if json {
            db::print_json(&status)
        } else {
            db::print(&render(&status))
        }
    })
}

fn render(status: &Status) -> String {
    if status.modules.is_empty() {
        return "no deployment is registered\n".to_owned();
    }
    let mut text = String::new();
    for (i, module) in status.modules.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let name = escape(&module.name);
        match &module.active_deployment {
            Some(key) => text.push_str(&format!("module {name} (active: {})\n", escape(key))),
            None => text.push_str(&format!("module {name} (no active deployment)\n")),
        }
        let rows: Vec<Vec<String>> = module
            .deployments
            .iter()
            .map(|d| {
                vec![
                    d.key.clone(),
                    if d.active { "yes" } else { "no" }.to_owned(),
                    d.live_replicas.to_string(),
                    db::instant(Some(d.created_at)),
                    db::instant(d.activated_at),
                ]
            })
            .collect();
        text.push_str(&db::table(
            "  ",
            &[
                "DEPLOYMENT",
                "ACTIVE",
                "LIVE",
                "CREATED (UTC)",
                "ACTIVATED (UTC)",
            ],
            &rows,
        ));
        text.push_str(&replica_table(module));
        if module.jobs.is_empty() {
            continue;
        }
        text.push('\n');
        let rows: Vec<Vec<String>> = module.jobs.iter().map(job_row).collect();
        text.push_str(&db::table(
            "  ",
            &[
                "VERB",
                "SCHEDULE",
                "ZONE",
                "MISSED",
                "STATE",
                "NEXT (UTC)",
                "NEXT (ZONE)",
                "LAST",
            ],
            &rows,
        ));
        for job in &module.jobs {
            let verb = escape(&job.verb);
            if let Some(reason) = &job.broken {
                text.push_str(&format!(
                    "  `{verb}` cannot be scheduled: {}; no replica runs it until its row is fixed\n",
                    escape(reason)
                ));
            }
            if let Some(overdue) = job.overdue_secs {
                text.push_str(&format!(
                    "  `{verb}` is overdue by {}: due at {} and claimed by no replica ({})\n",
                    db::age(Duration::from_secs(overdue)),
                    db::instant(job.next_execution),
                    replicas(module, &job.deployment)
                ));
            }
            if let Some(occurrence) = job.overdue_since {
                text.push_str(&format!(
                    "  `{verb}` is overdue: its occurrence of {} has not succeeded within its \
                     `expect_within` (reported to the event listeners)\n",
                    db::instant(Some(occurrence))
                ));
            }
            if let Some(note) = &job.pause_note {
                text.push_str(&format!("  `{verb}` is paused: {}\n", escape(note)));
            }
            if let Some(over) = &job.schedule_override {
                text.push_str(&override_line(&verb, job, over));
            }
            if let (Some(jitter), Some(offset)) = (&job.jitter, job.jitter_offset_ms) {
                text.push_str(&format!(
                    "  `{verb}` has a jitter of {jitter}: each occurrence starts {} after its \
                     instant{}\n",
                    offset_text(offset),
                    match job.next_start {
                        Some(start) => format!(", the next at {}", db::instant(Some(start))),
                        None => String::new(),
                    }
                ));
            }
            if job.every_replica {
                text.push_str(&replica_runs(job));
            }
        }
    }
    text
}

/// The replicas of the module's deployments, each with its deployment, its start and its last
/// heartbeat, under a blank line; a line saying so when none is live.
fn replica_table(module: &ModuleStatus) -> String {
    let rows: Vec<Vec<String>> = module
        .deployments
        .iter()
        .flat_map(|d| {
            d.replicas.iter().map(|r| {
                vec![
                    r.name.clone(),
                    d.key.clone(),
                    db::instant(Some(r.started_at)),
                    db::instant(Some(r.last_seen)),
                    if r.live { "yes" } else { "no" }.to_owned(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return "\n  no live replica\n".to_owned();
    }
    let mut text = "\n".to_owned();
    text.push_str(&db::table(
        "  ",
        &[
            "REPLICA",
            "DEPLOYMENT",
            "STARTED (UTC)",
            "LAST SEEN (UTC)",
            "LIVE",
        ],
        &rows,
    ));
    text
}

/// The live replicas of the deployment `key`, for the note on an overdue job.
fn replicas(module: &ModuleStatus, key: &str) -> String {
    let live = module
        .deployments
        .iter()
        .find(|d| d.key == key)
        .map_or(0, |d| d.live_replicas);
    match live {
        0 => format!("deployment `{}` has no live replica", escape(key)),
        1 => format!("deployment `{}` has 1 live replica", escape(key)),
        n => format!("deployment `{}` has {n} live replicas", escape(key)),
    }
}

/// What each live replica last did with a job on every replica (docs/runtime.md, "Jobs on every
/// replica"): a line per replica that reported a run, or one saying none did.
fn replica_runs(job: &JobStatus) -> String {
    let verb = escape(&job.verb);
    if job.replica_runs.is_empty() {
        return format!(
            "  `{verb}` runs on every replica; no live replica has reported a run of it\n"
        );
    }
    let mut text = format!("  `{verb}` runs on every replica; the last run of each:\n");
    for run in &job.replica_runs {
        let error = match &run.error {
            Some(error) => format!(": {}", escape(error)),
            None => String::new(),
        };
        text.push_str(&format!(
            "    {} ({}): {} at {}, ended {}{error}\n",
            escape(&run.replica),
            escape(&run.deployment),
            run.outcome,
            db::instant(Some(run.scheduled_at)),
            db::instant(Some(run.finished_at)),
        ));
    }
    text
}

/// The job's `missed` policy and, where one bounds it, its catch-up window (docs/runtime.md, "Missed
/// runs"): `once`, `skip`, `all 24h`, `once 2h`; `-` for a job on every replica, which runs no late
/// occurrence of its own.
fn missed(job: &JobStatus) -> String {
    if job.every_replica {
        return "-".to_owned();
    }
    match job.catch_up_secs {
        Some(secs) => format!(
            "{} {}",
            job.missed,
            cron_schema::format_duration(Duration::from_secs(secs))
        ),
        None => job.missed.clone(),
    }
}

fn job_row(job: &JobStatus) -> Vec<String> {
    let mut state = if job.every_replica {
        "every replica".to_owned()
    } else {
        job.state.clone()
    };
    if job.broken.is_some() {
        state.push_str(", broken");
    }
    if let Some(overdue) = job.overdue_secs {
        state.push_str(&format!(
            ", overdue {}",
            db::age(Duration::from_secs(overdue))
        ));
    }
    if job.paused {
        state.push_str(", paused");
    }
    if job.schedule_override.is_some() {
        state.push_str(", overridden");
    }
    if job.trigger_requested_at.is_some() {
        state.push_str(", triggered");
    }
    if let Some(backfill) = &job.backfill {
        state.push_str(&format!(
            ", backfill: {} queued from {}",
            backfill.queued,
            db::instant(Some(backfill.next))
        ));
    }
    let last = match &job.last_run {
        // Its runs are each replica's, listed under the table.
        None if job.every_replica => format!("{} replica(s)", job.replica_runs.len()),
        None => "-".to_owned(),
        Some(run) => {
            let when = db::instant(run.finished_at.or(Some(run.scheduled_at)));
            let manual = if run.manual { " (manual)" } else { "" };
            format!("{}{manual} {when}", run.outcome)
        }
    };
    vec![
        job.verb.clone(),
        job.expression.clone(),
        job.timezone.clone(),
        missed(job),
        state,
        db::instant(job.next_execution),
        job.next_execution_local
            .clone()
            .unwrap_or_else(|| "-".to_owned()),
        last,
    ]
}

/// The drift of an overridden verb: what runs, what its code says, who set it and when, and why.
fn override_line(verb: &str, job: &JobStatus, over: &ScheduleOverride) -> String {
    let by = match (&over.by, over.at) {
        (Some(by), at) => format!(" by {} at {}", escape(by), db::instant(at)),
        (None, _) => String::new(),
    };
    let note = match &over.note {
        Some(note) => format!(": {}", escape(note)),
        None => String::new(),
    };
    format!(
        "  `{verb}` runs its override `{}` in {}, not its code's `{}` in {} (set{by}{note}); \
         `cronverb reschedule {verb} --reset` returns to the code's\n",
        escape(&job.expression),
        escape(&job.timezone),
        escape(&over.code_expression),
        escape(&over.code_timezone),
    )
}

/// A jitter offset in milliseconds as people read it: `1m49.883s`, `0.250s`, `12s`.
pub fn offset_text(ms: u64) -> String {
    let (h, m, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if milli > 0 {
        out.push_str(&format!("{s}.{milli:03}s"));
    } else if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}
