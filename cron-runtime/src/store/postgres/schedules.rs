//! The schedules of job rows: parsed once, cached by their text, and reported once when a row's text no
//! longer parses (G8, docs/operations.md: such a row is reported and left alone).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use cron_schema::ZonedSchedule;

use crate::store::{JobSpec, rules};
use crate::sync::lock;

/// Parsed schedules by `(expression, zone)` text, and the bad rows already reported.
#[derive(Debug, Default)]
pub(super) struct Schedules {
    parsed: Mutex<HashMap<(String, String), Result<ZonedSchedule, String>>>,
    reported: Mutex<HashSet<(i64, String, String)>>,
}

impl Schedules {
    /// Remembers the schedules of a build's jobs, so that rows that match them are never re-parsed.
    pub(super) fn learn(&self, jobs: &[JobSpec]) {
        let mut parsed = lock(&self.parsed);
        for job in jobs {
            parsed.insert(
                (job.expression.clone(), zone_text(job)),
                Ok(job.schedule.clone()),
            );
        }
    }

    /// The schedule a row's text describes, or why it does not parse.
    pub(super) fn parse(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
        let key = (expression.to_owned(), zone.to_owned());
        if let Some(found) = lock(&self.parsed).get(&key) {
            return found.clone();
        }
        let parsed = rules::row_schedule(expression, zone);
        lock(&self.parsed).insert(key, parsed.clone());
        parsed
    }

    /// Whether this is the first report about this row with this text (reports are made once).
    pub(super) fn first_report(&self, job_id: i64, expression: &str, zone: &str) -> bool {
        lock(&self.reported).insert((job_id, expression.to_owned(), zone.to_owned()))
    }

    /// The schedule of a row, reporting it (once per row and text) when it does not parse.
    pub(super) fn of_row(
        &self,
        job_id: i64,
        verb: &str,
        expression: &str,
        zone: &str,
    ) -> Option<ZonedSchedule> {
        match self.parse(expression, zone) {
            Ok(schedule) => Some(schedule),
            Err(error) => {
                if self.first_report(job_id, expression, zone) {
                    tracing::error!(
                        job_id,
                        verb,
                        schedule = expression,
                        timezone = zone,
                        %error,
                        "job row {job_id} of `{verb}` has a schedule that does not parse \
                         (`{expression}` in `{zone}`); it is left alone until it is fixed"
                    );
                }
                None
            }
        }
    }
}

/// The zone as stored in `cron_jobs.timezone`.
pub(super) fn zone_text(job: &JobSpec) -> String {
    job.zone.name().to_owned()
}
