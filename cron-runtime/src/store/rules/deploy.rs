//! How a deployment's rows start, planned once for every store (G6, docs/operations.md): the first
//! occurrence a registration writes on each new row ([`first_occurrence`]), and what a takeover writes
//! on the rows of the deployment taking its module over ([`take_over`]): where each row goes on, since
//! when its schedule counts, which pending retry it takes with its verb, and which retries no row takes.
//! Each store reads the rows of both deployments, calls [`take_over`] and writes the plan its own way
//! (docs/runtime.md, "The store seam"). An operator's pause and pending trigger go with their verb
//! whatever the plan says; each store carries them in one write.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use cron_schema::{RunOn, ZonedSchedule};

use super::carry::retries_cut_short;
use crate::store::JobSpec;

/// The `next_execution` a registration writes on the row of `job`, inserted at `now`: the first
/// occurrence after now of `schedule`, the one the row runs (its code's, or its verb's override:
/// `reschedule::effective`), what `cronverb deploy` and `cronverb status` show until a takeover
/// carries or recomputes it. None for a job on every replica: no claim takes its row (docs/runtime.md,
/// "Jobs on every replica"), and a release that does not know the mark leaves a row with none alone
/// too.
pub(crate) fn first_occurrence(
    job: &JobSpec,
    schedule: &ZonedSchedule,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if job.on == RunOn::EveryReplica {
        return None;
    }
    schedule.next_after(now)
}

/// A job row of the deployment giving its module up, as a takeover reads it; `R` names a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GivenUp<'a, R> {
    pub(crate) verb: &'a str,
    pub(crate) expression: &'a str,
    pub(crate) zone: &'a str,
    /// The instant of its regular run in flight (the occurrence, or a retry's instant: the occurrence
    /// after either is the same one); `None` while idle or running a manual run, which took none.
    pub(crate) in_flight: Option<DateTime<Utc>>,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    /// Since when its schedule counts (`cron_jobs.start_time`).
    pub(crate) start_time: DateTime<Utc>,
    /// The occurrence last reported overdue (`cron_jobs.overdue_notified_for`; docs/operations.md,
    /// "Overdue").
    pub(crate) overdue_notified_for: Option<DateTime<Utc>>,
    /// The run whose retry the row holds while idle, pending at `next_execution`.
    pub(crate) retry: Option<R>,
    /// A job on every replica: its row has no occurrence to carry.
    pub(crate) every_replica: bool,
}

/// A job row of the deployment taking its module over.
#[derive(Debug, Clone)]
pub(crate) struct Taking<'a> {
    pub(crate) verb: &'a str,
    pub(crate) expression: &'a str,
    pub(crate) zone: &'a str,
    /// A run of its own is in flight (the deployment was reactivated while it ran): that run's end
    /// schedules the row, and the takeover leaves it alone.
    pub(crate) executing: bool,
    /// Its schedule; `None` when its text does not parse (G8): the row is left alone.
    pub(crate) schedule: Option<ZonedSchedule>,
    /// A job on every replica: no claim takes its row, and the takeover leaves it alone, with no
    /// occurrence (docs/runtime.md, "Jobs on every replica").
    pub(crate) every_replica: bool,
}

/// Where a row of the deployment taking over starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowStart<R> {
    pub(crate) next_execution: Option<DateTime<Utc>>,
    /// Since when its schedule counts: the given-up row's for an unchanged verb, now for the others.
    pub(crate) start_time: DateTime<Utc>,
    /// The occurrence last reported overdue: the given-up row's for an unchanged verb, so that a deploy
    /// does not report again an occurrence reported before it; none for the others.
    pub(crate) overdue_notified_for: Option<DateTime<Utc>>,
    /// The pending retry it takes with its verb, due at `next_execution`.
    pub(crate) retry: Option<R>,
}

/// What a takeover writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Takeover<R> {
    /// One per row taking over, in their order: `None` for a row left alone.
    pub(crate) rows: Vec<Option<RowStart<R>>>,
    /// The pending retries no row takes, each with the error its run ends `failed` with: it is never
    /// tried again (docs/runtime.md, "Retries").
    pub(crate) orphaned: Vec<(R, String)>,
}

/// The takeover of a module at `now` by the deployment of the rows `taking`, from the one of the rows
/// `given_up` (none when no deployment of the module was active):
///
/// - a verb with a pending retry takes it: the row is due at the retry's instant;
/// - an unchanged verb (the same expression and zone) goes on where the given-up row was, after its
///   regular run in flight if one is (that run ends under the old deployment; docs/runtime.md,
///   "Overlap");
/// - an added or changed verb starts from its schedule, after now, and so does a verb that ran on every
///   replica and now runs on one;
/// - a job on every replica is left alone: its row has no occurrence.
pub(crate) fn take_over<R: Copy>(
    given_up: &[GivenUp<'_, R>],
    taking: &[Taking<'_>],
    now: DateTime<Utc>,
) -> Takeover<R> {
    let by_verb: HashMap<&str, &GivenUp<'_, R>> = given_up.iter().map(|g| (g.verb, g)).collect();
    let mut taken: HashSet<&str> = HashSet::new();
    let rows = taking
        .iter()
        .map(|row| {
            let schedule = row
                .schedule
                .as_ref()
                .filter(|_| !row.executing && !row.every_replica)?;
            let old = by_verb.get(row.verb).filter(|old| !old.every_replica);
            if let Some(old) = old.filter(|old| old.retry.is_some()) {
                taken.insert(row.verb);
                return Some(RowStart {
                    next_execution: old.next_execution,
                    start_time: old.start_time,
                    overdue_notified_for: old.overdue_notified_for,
                    retry: old.retry,
                });
            }
            Some(match old {
                Some(old) if old.expression == row.expression && old.zone == row.zone => RowStart {
                    next_execution: match old.in_flight {
                        Some(at) => schedule.next_after(at),
                        None => old.next_execution,
                    },
                    start_time: old.start_time,
                    overdue_notified_for: old.overdue_notified_for,
                    retry: None,
                },
                _ => RowStart {
                    next_execution: schedule.next_after(now),
                    start_time: now,
                    overdue_notified_for: None,
                    retry: None,
                },
            })
        })
        .collect();
    let orphaned = given_up
        .iter()
        .filter_map(|old| {
            let retry = old.retry.filter(|_| !taken.contains(old.verb))?;
            let why = if taking.iter().any(|row| row.verb == old.verb) {
                "is running"
            } else {
                "has no verb"
            };
            Some((retry, retries_cut_short(why, old.verb)))
        })
        .collect();
    Takeover { rows, orphaned }
}

/// Says, once per takeover, that deployment `key` took `module` over, and from which deployment
/// (docs/operations.md, "When things go wrong"): the same line from every store.
pub(crate) fn log_takeover(module: &str, key: &str, previous: Option<&str>) {
    match previous {
        Some(previous) => tracing::info!(
            module,
            deployment = key,
            previous_deployment = previous,
            "deployment `{key}` took module `{module}` over from `{previous}`"
        ),
        None => tracing::info!(
            module,
            deployment = key,
            "deployment `{key}` took module `{module}` over; none of it was active"
        ),
    }
}

/// Says, once, on a replica of deployment `key` that saw itself active and no longer is, that it claims
/// nothing more (docs/operations.md, "When things go wrong"); `by` is the module's active deployment
/// now, if any.
pub(crate) fn log_superseded(module: &str, key: &str, by: Option<&str>) {
    match by {
        Some(by) => tracing::info!(
            module,
            deployment = key,
            superseded_by = by,
            "deployment `{key}` of module `{module}` was superseded by `{by}`; this replica claims \
             nothing more, and its runs in flight finish"
        ),
        None => tracing::info!(
            module,
            deployment = key,
            "deployment `{key}` of module `{module}` is no longer active; this replica claims \
             nothing more, and its runs in flight finish"
        ),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cron_schema::Schedule;

    use super::*;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, m, s).unwrap()
    }

    fn given_up<'a>(verb: &'a str, expression: &'a str) -> GivenUp<'a, i64> {
        GivenUp {
            verb,
            expression,
            zone: "UTC",
            in_flight: None,
            next_execution: Some(at(1, 0, 0)),
            start_time: at(0, 0, 0),
            overdue_notified_for: Some(at(0, 0, 0)),
            retry: None,
            every_replica: false,
        }
    }

    fn taking<'a>(verb: &'a str, expression: &'a str, schedule: &ZonedSchedule) -> Taking<'a> {
        Taking {
            verb,
            expression,
            zone: "UTC",
            executing: false,
            schedule: Some(schedule.clone()),
            every_replica: false,
        }
    }

    #[test]
    fn unchanged_verbs_go_on_and_changed_and_added_ones_start_after_now() {
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let minutely = ZonedSchedule::utc(Schedule::parse("* * * * *").unwrap());
        let now = at(0, 30, 30);
        let mut running = given_up("b", "0 * * * *");
        running.in_flight = Some(at(0, 0, 0));
        let plan = take_over(
            &[
                given_up("a", "0 * * * *"),
                running,
                given_up("c", "0 * * * *"),
            ],
            &[
                taking("a", "0 * * * *", &hourly),
                taking("b", "0 * * * *", &hourly),
                taking("c", "* * * * *", &minutely),
                taking("d", "* * * * *", &minutely),
            ],
            now,
        );
        let start = |next, start_time, overdue_notified_for| {
            Some(RowStart {
                next_execution: Some(next),
                start_time,
                overdue_notified_for,
                retry: None,
            })
        };
        assert_eq!(
            plan.rows,
            vec![
                start(at(1, 0, 0), at(0, 0, 0), Some(at(0, 0, 0))),
                // After its run in flight, however the given-up row was left.
                start(at(1, 0, 0), at(0, 0, 0), Some(at(0, 0, 0))),
                start(at(0, 31, 0), now, None),
                start(at(0, 31, 0), now, None),
            ]
        );
        assert!(plan.orphaned.is_empty());
    }

    #[test]
    fn a_pending_retry_goes_with_its_verb_or_ends() {
        let hourly = ZonedSchedule::utc(Schedule::parse("0 * * * *").unwrap());
        let mut a = given_up("a", "0 * * * *");
        a.retry = Some(7);
        a.next_execution = Some(at(0, 0, 30));
        let mut b = given_up("b", "0 * * * *");
        b.retry = Some(8);
        let mut c = given_up("c", "0 * * * *");
        c.retry = Some(9);
        let mut busy = taking("c", "0 * * * *", &hourly);
        busy.executing = true;
        let plan = take_over(
            &[a, b, c],
            &[taking("a", "* * * * *", &hourly), busy],
            at(0, 0, 10),
        );
        assert_eq!(
            plan.rows,
            vec![
                Some(RowStart {
                    next_execution: Some(at(0, 0, 30)),
                    start_time: at(0, 0, 0),
                    overdue_notified_for: Some(at(0, 0, 0)),
                    retry: Some(7),
                }),
                None,
            ]
        );
        assert_eq!(plan.orphaned.len(), 2);
        assert!(plan.orphaned[0].1.ends_with("has no verb `b`"));
        assert!(plan.orphaned[1].1.ends_with("is running `c`"));
    }
}
