//! `cronverb trigger`: one run of a verb now, through the replicas' claim, and with `--wait`, its
//! outcome as the exit status.

use std::process::ExitCode;
use std::time::Duration;

use cronverb::admin::{Admin, Run, Triggered};

use crate::db::{self, Connection, Failure};
use crate::escape::escape;

/// How often `--wait` reads the history: a run ends at most this long before the command sees it.
const POLL: Duration = Duration::from_millis(250);

/// The exit status of `--wait` when the run ended without succeeding.
const UNSUCCESSFUL: u8 = 3;

/// The exit status of `--wait` when `--timeout` passed before the run ended.
const WAIT_TIMED_OUT: u8 = 4;

/// Run a verb once now, through the normal claim (recorded as manual; refused while it is executing)
///
/// With `--wait`, wait for that run to end and exit with its outcome: 0 when it succeeded, 3 when it
/// ended otherwise (failed, panicked, timed_out, cancelled, abandoned), 4 when `--timeout` passed
/// first. As every database command: 1 when the database fails or refuses the trigger, 2 when what was
/// given is wrong.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    verb: db::Verb,
    /// Wait for the run the trigger causes to end, and exit with its outcome (`--json`: print the run)
    #[arg(long)]
    wait: bool,
    /// With `--wait`, how long to wait at most: `30s`, `10m`, `1h` [default: until the run ends]
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = db::parse_age)]
    timeout: Option<Duration>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let json = args.connection.json;
    db::run(&args.connection, |store| async move {
        let admin = store.admin();
        let triggered = admin.trigger(args.verb.name(), args.verb.module()).await?;
        if !args.wait {
            return if json {
                db::print_json(&triggered)
            } else {
                db::print(&triggered_text(&triggered))
            };
        }
        if !json {
            db::print(&triggered_text(&triggered))?;
        }
        let waited = match args.timeout {
            Some(timeout) => tokio::time::timeout(timeout, wait(&admin, &triggered))
                .await
                .ok(),
            None => Some(wait(&admin, &triggered).await),
        };
        let Some(run) = waited else {
            return Err(Failure::Status(
                WAIT_TIMED_OUT,
                Some(format!(
                    "the run of `{}` triggered at {} had not ended after {}; it goes on: \
                     `cronverb runs --verb {}` shows it",
                    triggered.verb,
                    db::instant(Some(triggered.requested_at)),
                    db::age(args.timeout.unwrap_or_default()),
                    triggered.verb,
                )),
            ));
        };
        let run = run?;
        if json {
            db::print_json(&run)?;
        } else {
            db::print(&outcome_text(&run))?;
        }
        if run.outcome == "succeeded" {
            Ok(())
        } else {
            Err(Failure::Status(UNSUCCESSFUL, None))
        }
    })
}

/// What a trigger did, for people.
fn triggered_text(triggered: &Triggered) -> String {
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
    text
}

/// Reads the history until the run that `triggered` caused has ended, and returns it.
async fn wait(admin: &Admin, triggered: &Triggered) -> Result<Run, Failure> {
    loop {
        if let Some(run) = admin.triggered_run(triggered).await?
            && Admin::run_ended(&run)
        {
            return Ok(run);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How the run ended, for people: `run 42 of `billing::heartbeat` failed after 1.2s: the relay said no`.
fn outcome_text(run: &Run) -> String {
    let mut text = format!(
        "run {} of `{}` {}",
        run.id,
        escape(&run.verb),
        escape(&run.outcome)
    );
    if let (Some(started), Some(finished)) = (run.started_at, run.finished_at)
        && let Ok(took) = (finished - started).to_std()
    {
        text.push_str(&format!(" after {:.3}s", took.as_secs_f64()));
    }
    if !run.manual {
        text.push_str(" (a regular occurrence due when the trigger was claimed)");
    }
    if let Some(error) = &run.error {
        text.push_str(&format!(": {}", escape(error)));
    }
    text.push('\n');
    text
}
