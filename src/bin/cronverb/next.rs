//! `cronverb next`: the next occurrences, one UTC instant per line, for scripts.

use std::io::{self, Write};

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
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let schedule = args.schedule.schedule()?;
    let mut out = io::stdout().lock();
    for occurrence in schedule.after(args.schedule.after()).take(args.count) {
        writeln!(out, "{}", format_utc(occurrence)).context("while writing to standard output")?;
    }
    out.flush().context("while writing to standard output")?;
    Ok(())
}
