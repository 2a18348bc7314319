//! `cronverb status`: modules, their deployments and replicas, and their jobs.

use std::process::ExitCode;

use cron_runtime::store::postgres::{JobStatus, Status};

use crate::db::{self, Connection};

/// List modules, deployments (active, live replicas) and jobs (schedule, state, next run, last outcome)
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
        let status = store.status(args.module.as_deref()).await?;
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
        match &module.active_deployment {
            Some(key) => text.push_str(&format!("module {} (active: {key})\n", module.name)),
            None => text.push_str(&format!("module {} (no active deployment)\n", module.name)),
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
                "STATE",
                "NEXT (UTC)",
                "NEXT (ZONE)",
                "LAST",
            ],
            &rows,
        ));
        for job in &module.jobs {
            if let Some(note) = &job.pause_note {
                text.push_str(&format!("  `{}` is paused: {note}\n", job.verb));
            }
        }
    }
    text
}

fn job_row(job: &JobStatus) -> Vec<String> {
    let mut state = job.state.clone();
    if job.paused {
        state.push_str(", paused");
    }
    if job.trigger_requested_at.is_some() {
        state.push_str(", triggered");
    }
    let last = match &job.last_run {
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
        state,
        db::instant(job.next_execution),
        job.next_execution_local
            .clone()
            .unwrap_or_else(|| "-".to_owned()),
        last,
    ]
}
