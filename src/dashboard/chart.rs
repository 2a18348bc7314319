//! The inline-SVG chart of a job's recent runs: one bar per run, oldest on the left, its height the
//! run's duration (on a square-root scale, so that one slow run does not flatten the others), its
//! colour (a CSS class) the outcome.

use crate::admin::Run;

use super::format;

/// The chart's size in SVG units; the CSS scales it to the page's width.
pub(super) const WIDTH: u32 = 600;
pub(super) const HEIGHT: u32 = 80;

/// The chart of a page's runs.
#[derive(Debug)]
pub(super) struct Chart {
    pub(super) bars: Vec<Bar>,
    /// The longest duration shown, for the axis label.
    pub(super) longest: String,
}

/// One run's bar.
#[derive(Debug)]
pub(super) struct Bar {
    pub(super) x: String,
    pub(super) y: String,
    pub(super) width: String,
    pub(super) height: String,
    /// `outcome-succeeded`, `outcome-failed`, …
    pub(super) class: String,
    /// The tooltip: outcome, scheduled instant, duration.
    pub(super) title: String,
}

/// The chart of `runs` (newest first, as the history lists them).
pub(super) fn chart(runs: &[Run]) -> Chart {
    let durations: Vec<i64> = runs
        .iter()
        .map(|run| match (run.started_at, run.finished_at) {
            (Some(start), Some(end)) => (end - start).num_milliseconds().max(0),
            _ => 0,
        })
        .collect();
    let longest = durations.iter().copied().max().unwrap_or(0);
    let slot = f64::from(WIDTH) / runs.len().max(1) as f64;
    let scale = (longest.max(1) as f64).sqrt();
    let bars = runs
        .iter()
        .rev()
        .zip(durations.iter().rev())
        .enumerate()
        .map(|(i, (run, &ms))| {
            // Runs without a duration (skipped, running) still show, as a short bar.
            let height = (f64::from(HEIGHT - 4) * (ms as f64).sqrt() / scale).max(3.0);
            Bar {
                x: format!("{:.1}", i as f64 * slot + slot * 0.1),
                y: format!("{:.1}", f64::from(HEIGHT) - height),
                width: format!("{:.1}", (slot * 0.8).max(1.0)),
                height: format!("{height:.1}"),
                class: format!("outcome-{}", run.outcome),
                title: format!(
                    "{} at {}, {}",
                    run.outcome,
                    format::utc(Some(run.scheduled_at)),
                    format::span(run.started_at, run.finished_at)
                ),
            }
        })
        .collect();
    Chart {
        bars,
        longest: format::millis(longest),
    }
}
