//! What an outage does to a build's jobs, computed with the stores' own rules and written nowhere
//! (`cronverb simulate`; docs/operations.md, "Simulating an outage"): for each job of a schema, which
//! missed occurrences run when the application comes back, when, and which are skipped, by its missed-run
//! policy and catch-up window (docs/runtime.md, "Missed runs").
//!
//! The simulation is one replica that comes back at `up_at` with every run taking no time: each claim is
//! [`DueRow::take`], each end [`HeldRun::ending`], exactly as a store asks them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::{MAX_CATCH_UP_RUNS, MissedPolicy, RunOn, Schema};
use serde::Serialize;

use crate::defaults::DEFAULT_TIMEOUT;
use crate::job::{fields_of, job_spec};
use crate::rfc3339;
use crate::store::rules::{Due, DueRow, End, HeldRun, RetryHeld, Start, Take, jittered};
use crate::store::{JobSpec, Outcome, Retries, StoreSettings};

/// An outage: the application down from `from` to `to`, its first replica back at `up_at` (`to` unless
/// later), with the runtime's missed-run `tolerance` (60 s by default).
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub up_at: DateTime<Utc>,
    pub tolerance: Duration,
}

/// What the outage does to one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobOutage {
    pub module: String,
    pub verb: String,
    /// The job's policy (`once`, `skip`, `all`).
    pub missed: MissedPolicy,
    /// The job's catch-up window in seconds, its own or its policy's default; `None`: no bound.
    pub catch_up_secs: Option<u64>,
    /// The job's jitter offset in milliseconds (docs/runtime.md, "Jitter"): each regular occurrence
    /// starts this much after its instant, and is late from there; left out when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub jitter_offset_ms: u64,
    /// What happens when the application is back, in order.
    pub events: Vec<Event>,
    /// Its first occurrence after the catch-up, due on time.
    #[serde(serialize_with = "rfc3339::option::serialize")]
    pub next: Option<DateTime<Utc>>,
    /// Why the job is not simulated: it runs on every replica (nothing is missed), or it does not
    /// validate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One step of a job's return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The occurrence `scheduled_at` runs, starting `at`; `late` as the claim decides it.
    Run {
        #[serde(with = "rfc3339")]
        scheduled_at: DateTime<Utc>,
        #[serde(with = "rfc3339")]
        at: DateTime<Utc>,
        late: bool,
    },
    /// `count` occurrences from `first` on never run: recorded `skipped` at the claim (`skip`, or older
    /// than the window), or skipped by the run before them (`once`).
    Skipped {
        #[serde(with = "rfc3339")]
        first: DateTime<Utc>,
        count: u32,
    },
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

/// What `outage` does to every job of `schema` that runs on one replica.
pub fn outage(schema: &Schema, outage: &Outage) -> Vec<JobOutage> {
    schema
        .verbs()
        .map(|(module, verb)| {
            let mut report = JobOutage {
                module: module.name.clone(),
                verb: verb.name.clone(),
                missed: verb.cron.missed,
                catch_up_secs: None,
                jitter_offset_ms: 0,
                events: Vec::new(),
                next: None,
                note: None,
            };
            if verb.cron.on == RunOn::EveryReplica {
                report.note = Some(
                    "runs on every replica: each replica runs the occurrences that come while it is \
                     up, and none is missed"
                        .to_owned(),
                );
                return report;
            }
            match job_spec(fields_of(&verb.name, &verb.cron), DEFAULT_TIMEOUT) {
                Ok(job) => {
                    report.catch_up_secs = job.catch_up.map(|window| window.as_secs());
                    let offset = job.jitter_offset(&module.name);
                    report.jitter_offset_ms = u64::try_from(offset.as_millis()).unwrap_or(u64::MAX);
                    (report.events, report.next) = job_outage(&job, offset, outage);
                }
                Err(errors) => {
                    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    report.note = Some(errors.join("; "));
                }
            }
            report
        })
        .collect()
}

/// The events of one job, and where it goes on.
fn job_outage(
    job: &JobSpec,
    offset: Duration,
    outage: &Outage,
) -> (Vec<Event>, Option<DateTime<Utc>>) {
    let settings = StoreSettings {
        missed_tolerance: outage.tolerance,
        ..StoreSettings::default()
    };
    let schedule = &job.schedule;
    let now = outage.up_at.max(outage.to);
    let mut events = Vec::new();
    // Its row when the application went down: its first occurrence after `from` (the ones before ran).
    let mut next = schedule.next_after(outage.from);
    // Every missed occurrence, at most, and the one it ends with.
    // An occurrence is claimed once it is due to start: its jittered start (docs/runtime.md,
    // "Jitter"); one that starts after `now` runs on time.
    for _ in 0..=MAX_CATCH_UP_RUNS as usize + 2 {
        let Some(at) = next.filter(|at| jittered(*at, offset) <= now) else {
            break;
        };
        let row = DueRow {
            at,
            due: Due::Regular,
            missed: job.missed,
            lease: job.lease,
            catch_up: job.catch_up,
            offset,
        };
        match row.take(|| Some(schedule), now, &settings) {
            Some(Take::Run {
                scheduled_at,
                late,
                start_at,
                ..
            }) => {
                events.push(Event::Run {
                    scheduled_at,
                    at: start_at,
                    late,
                });
                let held = HeldRun {
                    scheduled_at,
                    next_execution: Some(scheduled_at),
                    manual: false,
                    backfill: false,
                    paused: false,
                    active: true,
                    retry: RetryHeld::Nothing,
                    run_id: 0,
                    attempt: 1,
                    retries: Retries::default(),
                    every_missed: job.missed == MissedPolicy::All,
                    // A simulation runs the schedule alone, with no backfill queued.
                    backfill_queued: false,
                };
                let end = End::Recorded {
                    outcome: Outcome::Succeeded,
                    error: None,
                    at: Some(now),
                    started: Start::Reported(Some(now)),
                    retry_after: None,
                    requested: false,
                };
                let ending = held.ending(Some(schedule), &end, now);
                if ending.skipped > 0
                    && let Some(first) = schedule.next_after(scheduled_at)
                {
                    events.push(Event::Skipped {
                        first,
                        count: ending.skipped,
                    });
                }
                next = ending.next;
            }
            Some(Take::Skip {
                scheduled_at,
                next: after,
                skipped,
                ..
            }) => {
                events.push(Event::Skipped {
                    first: scheduled_at,
                    count: skipped,
                });
                next = after;
            }
            _ => break,
        }
    }
    (events, next)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cron_schema::{Cron, Verb};

    use super::*;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, m, s).unwrap()
    }

    fn minutely(cron: Cron) -> Vec<JobOutage> {
        // docs/runtime.md, "Missed runs": down from 00:00:30 to 00:10:30.
        let schema = Schema::new([("billing", Verb::new("billing::a", cron))]);
        outage(
            &schema,
            &Outage {
                from: at(0, 0, 30),
                to: at(0, 10, 30),
                up_at: at(0, 10, 30),
                tolerance: Duration::from_secs(60),
            },
        )
    }

    #[test]
    fn each_policy_and_window_as_the_runtime_docs_tell_it() {
        let run = |m, late| Event::Run {
            scheduled_at: at(0, m, 0),
            at: at(0, 10, 30),
            late,
        };
        let skipped = |m, count| Event::Skipped {
            first: at(0, m, 0),
            count,
        };
        let once = &minutely(Cron::new("* * * * *"))[0];
        assert_eq!(once.events, [run(1, true), skipped(2, 9)]);
        assert_eq!(once.next, Some(at(0, 11, 0)));
        let skip = &minutely(Cron::new("* * * * *").missed(MissedPolicy::Skip))[0];
        assert_eq!(skip.events, [skipped(1, 10)]);
        let all = &minutely(
            Cron::new("* * * * *")
                .missed(MissedPolicy::All)
                .catch_up("5m"),
        )[0];
        assert_eq!(
            all.events,
            [
                skipped(1, 5),
                run(6, true),
                run(7, true),
                run(8, true),
                run(9, true),
                run(10, false)
            ]
        );
        assert_eq!(
            (all.next, all.catch_up_secs),
            (Some(at(0, 11, 0)), Some(300))
        );
        let bounded_once = &minutely(Cron::new("* * * * *").catch_up("2m"))[0];
        assert_eq!(
            bounded_once.events,
            [skipped(1, 8), run(9, true), skipped(10, 1)]
        );
    }

    #[test]
    fn a_job_on_every_replica_or_one_that_does_not_validate_is_noted() {
        let every = &minutely(Cron::new("* * * * *").on(RunOn::EveryReplica))[0];
        assert!(every.events.is_empty() && every.note.is_some(), "{every:?}");
        let bad = &minutely(Cron::new("* * * * * *").missed(MissedPolicy::All))[0];
        assert!(bad.note.as_deref().unwrap().contains("at most"), "{bad:?}");
    }
}
