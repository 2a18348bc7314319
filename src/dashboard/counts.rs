//! Each module's runs of the last 24 hours by outcome, for the overview's table of modules
//! (docs/dashboard.md, "What the pages show"). Read through the operator API's `runs` (the module's runs
//! scheduled in the last 24 hours, newest first, at most [`LIMIT`]) and counted here: the operator API
//! has no statement that counts, so a module with more runs than that shows the counts of its latest
//! [`LIMIT`] and says so. Each module's counts are kept [`FRESH_FOR`], so that the page's refresh every
//! 5 seconds does not read them again each time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::admin::{Admin, RunFilter, Since};

/// The most runs of a module read for its counts.
pub(super) const LIMIT: u32 = 2_000;

/// How long a module's counts are kept before they are read again.
pub(super) const FRESH_FOR: Duration = Duration::from_secs(30);

/// The window counted.
pub(super) const WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The outcomes in the order the table shows them, with their labels.
const OUTCOMES: &[(&str, &str)] = &[
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("panicked", "panicked"),
    ("timed_out", "timed out"),
    ("abandoned", "abandoned"),
    ("cancelled", "cancelled"),
    ("skipped", "skipped"),
    ("retrying", "retrying"),
    ("running", "running"),
];

/// A module's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Counts {
    /// The outcomes with at least one run, in the table's order.
    pub(super) outcomes: Vec<OutcomeCount>,
    /// The module has more runs in the window than were read: the counts are of the latest [`LIMIT`].
    pub(super) capped: bool,
    /// How many runs were read.
    pub(super) of: usize,
}

/// How many runs ended with one outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OutcomeCount {
    pub(super) outcome: String,
    pub(super) label: String,
    pub(super) count: usize,
}

impl Counts {
    /// The counts of `outcomes`, one per run read; `capped` when there were more.
    pub(super) fn of<'a>(outcomes: impl IntoIterator<Item = &'a str>, capped: bool) -> Counts {
        let mut by: HashMap<&str, usize> = HashMap::new();
        let mut read = 0;
        for outcome in outcomes {
            *by.entry(outcome).or_default() += 1;
            read += 1;
        }
        let mut counted: Vec<OutcomeCount> = OUTCOMES
            .iter()
            .filter_map(|&(outcome, label)| {
                by.remove(outcome).map(|count| OutcomeCount {
                    outcome: outcome.to_owned(),
                    label: label.to_owned(),
                    count,
                })
            })
            .collect();
        // An outcome a newer release records, shown as it is written.
        let mut others: Vec<_> = by.into_iter().collect();
        others.sort();
        counted.extend(others.into_iter().map(|(outcome, count)| OutcomeCount {
            outcome: outcome.to_owned(),
            label: outcome.to_owned(),
            count,
        }));
        Counts {
            outcomes: counted,
            capped,
            of: read,
        }
    }
}

/// The counts read, by module, with when they were read.
#[derive(Debug, Default)]
pub(super) struct CountsCache {
    read: Mutex<HashMap<String, (Instant, Counts)>>,
}

impl CountsCache {
    /// `module`'s counts, read again when older than [`FRESH_FOR`]; `None` when the history cannot be
    /// read (the overview shows the rest).
    pub(super) async fn of(&self, admin: &Admin, module: &str) -> Option<Counts> {
        let now = Instant::now();
        if let Some((at, counts)) = self.lock().get(module)
            && now.saturating_duration_since(*at) < FRESH_FOR
        {
            return Some(counts.clone());
        }
        let filter = RunFilter {
            module: Some(module.to_owned()),
            verb: None,
            since: Some(Since::Ago(WINDOW)),
            before: None,
            // One more than counted, to know whether there are more.
            limit: LIMIT + 1,
        };
        let runs = match admin.runs(&filter).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(
                    target: "cronverb::dashboard",
                    module = %super::escape::Escaped(module),
                    error = %super::escape::Escaped(&error.to_string()),
                    "reading a module's runs of the last 24 hours failed"
                );
                return None;
            }
        };
        let capped = runs.len() > LIMIT as usize;
        let counts = Counts::of(
            runs.iter()
                .take(LIMIT as usize)
                .map(|run| run.outcome.as_str()),
            capped,
        );
        self.lock().insert(module.to_owned(), (now, counts.clone()));
        Some(counts)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Counts)>> {
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::Counts;

    #[test]
    fn outcomes_are_counted_in_the_tables_order() {
        let counts = Counts::of(
            ["failed", "succeeded", "succeeded", "timed_out", "brand_new"],
            false,
        );
        let shown: Vec<(String, usize)> = counts
            .outcomes
            .iter()
            .map(|c| (c.label.clone(), c.count))
            .collect();
        assert_eq!(
            shown,
            [
                ("succeeded".to_owned(), 2),
                ("failed".to_owned(), 1),
                ("timed out".to_owned(), 1),
                ("brand_new".to_owned(), 1)
            ]
        );
        assert_eq!(counts.of, 5);
        assert!(Counts::of([], false).outcomes.is_empty());
    }
}
