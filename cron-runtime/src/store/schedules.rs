//! The schedules of job rows, as the database stores read them: parsed once and cached by their text,
//! and checked against the build with one rule for every store (G8, docs/operations.md): a row whose
//! text does not parse is reported and left alone; a row edited by hand to another schedule that parses
//! is reported and wins. Each report is made once per row and text, whatever the number of rows that
//! share a text.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use cron_schema::ZonedSchedule;

use crate::store::{JobSpec, rules};
use crate::sync::lock;

/// Parsed schedules by `(expression, zone)` text, and the bad rows already reported.
#[derive(Debug, Default)]
pub(crate) struct Schedules {
    parsed: Mutex<HashMap<(String, String), Result<ZonedSchedule, String>>>,
    reported: Mutex<HashSet<(i64, String, String)>>,
}

impl Schedules {
    /// Remembers the schedules of a build's jobs, so that rows that match them are never re-parsed.
    pub(crate) fn learn(&self, jobs: &[JobSpec]) {
        let mut parsed = lock(&self.parsed);
        for job in jobs {
            parsed.insert(
                (job.expression.clone(), zone_text(job)),
                Ok(job.schedule.clone()),
            );
        }
    }

    /// The schedule a row's text describes, or why it does not parse.
    pub(crate) fn parse(&self, expression: &str, zone: &str) -> Result<ZonedSchedule, String> {
        let key = (expression.to_owned(), zone.to_owned());
        if let Some(found) = lock(&self.parsed).get(&key) {
            return found.clone();
        }
        let parsed = rules::row_schedule(expression, zone);
        lock(&self.parsed).insert(key, parsed.clone());
        parsed
    }

    /// Whether this is the first report about this row with this text (reports are made once).
    pub(crate) fn first_report(&self, job_id: i64, expression: &str, zone: &str) -> bool {
        lock(&self.reported).insert((job_id, expression.to_owned(), zone.to_owned()))
    }

    /// The schedule of a row of `verb`, checked against `build`, the build's job of that verb (`None`
    /// when this store does not know the build's jobs): the build's own when the row says the same, the
    /// row's when it was edited by hand to another schedule that parses (reported once per row and text:
    /// the row wins), `None` when the row does not parse (reported by [`Schedules::of_row`]). A row that
    /// runs an operator's override of the build's schedule (`overridden`: docs/operations.md, "Changing
    /// a schedule without a build") wins too, said once at the info level: it is no mistake.
    pub(crate) fn checked(
        &self,
        job_id: i64,
        verb: &str,
        expression: &str,
        zone: &str,
        build: Option<&JobSpec>,
        overridden: bool,
    ) -> Option<ZonedSchedule> {
        let Some(job) = build else {
            return self.of_row(job_id, verb, expression, zone);
        };
        if job.expression == expression && zone_text(job) == zone {
            return Some(job.schedule.clone());
        }
        let schedule = self.of_row(job_id, verb, expression, zone)?;
        if overridden {
            if self.first_report(job_id, expression, zone) {
                tracing::info!(
                    job_id,
                    verb,
                    schedule = expression,
                    timezone = zone,
                    "`{verb}` runs its override `{expression}` in `{zone}` instead of this \
                     build's `{}` in `{}` until it is reset",
                    job.expression,
                    zone_text(job)
                );
            }
        } else if self.first_report(job_id, expression, zone) {
            tracing::warn!(
                job_id,
                verb,
                schedule = expression,
                timezone = zone,
                "job row {job_id} of `{verb}` says `{expression}` in `{zone}` but this build \
                 declares `{}` in `{}`; the row wins",
                job.expression,
                zone_text(job)
            );
        }
        Some(schedule)
    }

    /// The schedule of a row, reporting it (once per row and text) when it does not parse.
    pub(crate) fn of_row(
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
pub(crate) fn zone_text(job: &JobSpec) -> String {
    job.zone.name().to_owned()
}
