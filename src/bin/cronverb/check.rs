//! `cronverb check`: validates an expression, prints its normalized form and its next occurrences.

use std::io::{self, Write};

use anyhow::Context;
use chrono_tz::Tz;

use crate::schedule_args::{ScheduleArgs, format_utc};

/// How many occurrences `check` shows.
const SHOWN: usize = 5;

/// Check an expression: print its normalized form and next occurrences, or say what is wrong with it
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    schedule: ScheduleArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let schedule = args.schedule.schedule()?;
    let after = args.schedule.after();
    let zone = schedule.zone();
    let occurrences: Vec<_> = schedule.after(after).take(SHOWN).collect();

    let mut out = io::stdout().lock();
    let kind = if schedule.schedule().is_fixed_time() {
        "fixed-time"
    } else {
        "interval"
    };
    writeln!(out, "{schedule}")?;
    writeln!(out, "valid {kind} schedule in {}", zone.name())?;
    if occurrences.is_empty() {
        writeln!(out, "no occurrence after {}", format_utc(after))?;
    } else {
        writeln!(out, "next occurrences after {}:", format_utc(after))?;
    }
    for occurrence in occurrences {
        if zone == Tz::UTC {
            writeln!(out, "  {}", format_utc(occurrence))?;
        } else {
            let local = occurrence.with_timezone(&zone);
            writeln!(
                out,
                "  {}  {}",
                format_utc(occurrence),
                local.format("%Y-%m-%dT%H:%M:%S%:z %Z")
            )?;
        }
    }
    out.flush().context("while writing to standard output")?;
    Ok(())
}
