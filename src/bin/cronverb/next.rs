//! `cronverb next`: the next occurrences, one UTC instant per line, for scripts; with `--jitter`, the
//! instants a job with that jitter starts at (docs/runtime.md, "Jitter").

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;

use crate::schedule_args::{ScheduleArgs, format_utc};

/// Print the next occurrences of an expression, one RFC 3339 UTC instant per line
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    schedule: ScheduleArgs,

    /// How many occurrences to print at most (fewer when the schedule ends first)
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 10)]
    count: usize,

    /// Print when a job with this jitter (such as `10m`) starts: each occurrence plus the job's fixed
    /// offset, to the millisecond; needs `--verb`
    #[arg(long, value_name = "DURATION", requires = "verb", value_parser = parse_jitter)]
    jitter: Option<Duration>,

    /// The job whose offset `--jitter` computes, as its full verb name (`billing::nightly_report`)
    #[arg(long, value_name = "VERB", requires = "jitter")]
    verb: Option<String>,

    /// The job's module [default: the verb's first segment, as the runtime names it]
    #[arg(long, value_name = "MODULE", requires = "jitter")]
    module: Option<String>,
}

fn parse_jitter(text: &str) -> Result<Duration, String> {
    cron_schema::parse_jitter(text).map_err(|error| error.to_string())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let schedule = args.schedule.schedule()?;
    let offset = match (args.jitter, &args.verb) {
        (Some(jitter), Some(verb)) => {
            cron_schema::check_jitter(schedule.schedule(), &args.schedule.expression, jitter)?;
            let module = args
                .module
                .clone()
                .unwrap_or_else(|| cron_schema::module_of(verb).to_owned());
            let offset = cron_schema::jitter_offset(&module, verb, jitter);
            // Said on standard error: standard output stays one instant per line.
            eprintln!(
                "`{verb}` of module `{module}` with jitter {}: each occurrence starts {} after its \
                 instant",
                cron_schema::format_duration(jitter),
                crate::status::offset_text(u64::try_from(offset.as_millis()).unwrap_or(0))
            );
            Some(offset)
        }
        _ => None,
    };
    let mut out = io::stdout().lock();
    for occurrence in schedule.after(args.schedule.after()).take(args.count) {
        let line = match offset {
            Some(offset) => {
                let start = occurrence + chrono::TimeDelta::from_std(offset)?;
                start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            }
            None => format_utc(occurrence),
        };
        writeln!(out, "{line}").context("while writing to standard output")?;
    }
    out.flush().context("while writing to standard output")?;
    Ok(())
}
