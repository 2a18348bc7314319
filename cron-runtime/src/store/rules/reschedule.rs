//! Schedule overrides (docs/operations.md, "Changing a schedule without a build"), decided once for
//! every store: which schedule an operator may give a verb ([`check`]), where each of its rows goes on
//! when its schedule changes ([`rescheduled`]), and which schedule a new deployment's row of an
//! overridden verb starts with ([`effective`]). The override wins over the code's expression until it
//! is reset, also when a later deployment's code changes that expression; but a job whose code marks it
//! `fixed` is never overridden: an override of it is refused ([`refusal`]), and one a deployment that
//! marks it fixed finds is dropped by that deployment's registration ([`dropped`]). An override lives
//! as long as its verb: the takeover of a deployment whose code has no such verb drops it
//! ([`outlived`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use cron_schema::ZonedSchedule;

use super::row_schedule;
use crate::store::JobSpec;

/// Why an override of `verb` is refused, if it is, from what its row says of its code: a job that runs
/// on every replica keeps its code's schedule (each replica runs it from its build, never from a row),
/// and so does a job its code marks `fixed`. A reset is never refused: it returns to the code's
/// schedule, which is what both keep.
pub(crate) fn refusal(verb: &str, every_replica: bool, fixed: bool) -> Option<String> {
    if every_replica {
        return Some(format!(
            "`{verb}` runs on every replica, from each replica's build: its schedule cannot be \
             overridden"
        ));
    }
    fixed.then(|| {
        format!(
            "`{verb}` is declared `fixed` (`#[cron(..., fixed)]`): its schedule cannot be \
             overridden; change it in the code and deploy"
        )
    })
}

/// The row that speaks for a verb among its rows (one per deployment of its module, oldest first):
/// its active deployment's, else its newest. Its code decides whether the verb may be overridden
/// ([`refusal`]), in which zone an expression given without one is read, and what the operator is told
/// the verb runs; `active` says whether a row's deployment is the module's active one.
pub(crate) fn speaks_for<R>(rows: &[R], active: impl Fn(&R) -> bool) -> Option<&R> {
    rows.iter().find(|row| active(row)).or(rows.last())
}

/// Whether a row of an overridden verb takes the override (or its reset): not one whose code marks
/// the job `fixed`, which keeps its code's schedule, as when a rolling deploy registered it before
/// its takeover ([`refusal`] refuses the override where the row that speaks for the verb is fixed).
pub(crate) fn overridable(fixed: bool) -> bool {
    !fixed
}

/// Whether an override to `target` (expression and zone) of a verb whose code declares `code` is a
/// reset: an override to the code's own schedule would be one no row shows (each row runs its code's)
/// yet later deployments would start at, so it returns to the code's schedule as `--reset` does and
/// keeps no override; it is audited as the reschedule it was asked as.
pub(crate) fn is_reset(target: (&str, &str), code: (&str, &str)) -> bool {
    target == code
}

/// The override a reschedule to `target` (expression and zone) keeps, given `code`, the schedule its
/// speaking row's code declares ([`speaks_for`]): `target`, or none where it [`is_reset`]. Where it
/// keeps none, every row of the verb goes back to its own code's schedule, whatever the code of the
/// row that speaks declares, and no override is kept, as `--reset` does; where it keeps one, every
/// overridable row runs it (docs/operations.md, "Changing a schedule without a build").
pub(crate) fn overrides_to<'a>(
    target: (&'a str, &'a str),
    code: (&str, &str),
) -> Option<(&'a str, &'a str)> {
    (!is_reset(target, code)).then_some(target)
}

/// Whether a new deployment's registration drops `over`, the override of `job`'s verb: where the code
/// now marks the job `fixed`, the code wins and the override is deleted, so that no later deployment
/// runs it either (docs/operations.md, "Changing a schedule without a build").
pub(crate) fn dropped(job: &JobSpec, over: Option<&Override>) -> bool {
    job.fixed && over.is_some()
}

/// The verbs among `overridden` (the module's overrides) whose override a deployment whose code
/// declares `verbs` drops when it takes its module over: those its code has no such verb of. An
/// override lives as long as its verb: a later deployment that brings the verb back runs its code's
/// schedule, not one set for code that is gone. Only a takeover drops it, never a registration: a
/// deployment registered but not active (a rollback before its takeover, `cronverb deploy` with no
/// replica yet) leaves the verb running where it runs. The takeover that drops it returns every row
/// of the verb in the module's other deployments, older and newer, to its own code's schedule (from
/// its copy, going on where [`rescheduled`] says): no row runs an override that no longer exists
/// (docs/operations.md, "Changing a schedule without a build").
pub(crate) fn outlived<'a>(
    overridden: impl IntoIterator<Item = &'a str>,
    verbs: &[&str],
) -> Vec<&'a str> {
    overridden
        .into_iter()
        .filter(|verb| !verbs.contains(verb))
        .collect()
}

/// Why an override of `verb` is refused when `active_without_it`, its module's active deployment, has
/// no such verb: that deployment's takeover dropped the verb's override ([`outlived`]) and returned
/// its rows to their code's schedule, and it never takes the module over again, so an override kept
/// now would outlive the verb and a later deployment that brings it back would start at it. Decided
/// after the module's lock (the takeover's), so a reschedule that races the takeover sees it
/// committed (docs/operations.md, "Changing a schedule without a build").
pub(crate) fn without_its_verb(verb: &str, active_without_it: Option<&str>) -> Option<String> {
    active_without_it.map(|key| {
        format!(
            "the module's active deployment `{key}` has no such verb `{verb}`: its override was \
             dropped at that deployment's takeover; change it in the code that brings it back"
        )
    })
}

/// Says at the warn level that deployment `key`'s registration dropped `over`, the override of
/// `verb`, its code declaring the verb `fixed` ([`dropped`]); every store's registration says it in
/// these words.
pub(crate) fn log_fixed(key: &str, verb: &str, over: &Override) {
    tracing::warn!(
        verb,
        schedule = over.expression,
        timezone = over.zone,
        "deployment `{key}` declares `{verb}` fixed: the override (`{}` in `{}`) is dropped and the \
         code's schedule runs",
        over.expression,
        over.zone
    );
}

/// Says at the warn level that deployment `key`'s takeover dropped `over`, the override of `verb`,
/// its code having no such verb ([`outlived`]); every store's takeover says it in these words.
pub(crate) fn log_outlived(key: &str, verb: &str, over: &Override) {
    tracing::warn!(
        verb,
        schedule = over.expression,
        timezone = over.zone,
        "deployment `{key}` has no `{verb}`: its takeover drops the override (`{}` in `{}`); a \
         later deployment that brings `{verb}` back runs its code's schedule",
        over.expression,
        over.zone
    );
}

/// Why a deployment drops an operator's override ([`Admin::deploy`](crate::admin::Admin::deploy)
/// reports it; in JSON, its name in snake case).
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The code marks the verb `fixed`: the registration dropped it ([`dropped`]).
    Fixed,
    /// The code has no such verb: the deployment's takeover drops it ([`outlived`]); until then it
    /// is kept, and a rollback before that takeover still runs it.
    Removed,
}

/// The schedule `expression` in `zone` gives `verb`, or why an override to it is refused: the
/// expression or the zone does not parse (the same engine and message as `cronverb check`), or the
/// job's `jitter` is not shorter than the new schedule's shortest interval (the attribute's own rule,
/// docs/runtime.md, "Jitter").
pub(crate) fn check(
    expression: &str,
    zone: &str,
    jitter: Option<Duration>,
) -> Result<ZonedSchedule, String> {
    let schedule = row_schedule(expression, zone)?;
    if let Some(jitter) = jitter {
        cron_schema::check_jitter(schedule.schedule(), expression, jitter)
            .map_err(|e| e.to_string())?;
    }
    Ok(schedule)
}

/// Where a row whose schedule changes goes on ([`rescheduled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Its next occurrence (`cron_jobs.next_execution`).
    pub(crate) next_execution: Option<DateTime<Utc>>,
    /// When its schedule starts counting (`cron_jobs.start_time`): an occurrence before it is not
    /// the row's, and is never reported overdue (docs/operations.md, "Overdue").
    pub(crate) start_time: DateTime<Utc>,
}

/// Where a row goes on when its schedule becomes `schedule` at `now`: an idle row with no pending
/// retry at the new schedule's first occurrence after now (so every replica runs the new schedule from
/// its next occurrence); a row that executes, or holds a pending retry, keeps its `next_execution`,
/// and the end of that run or retry reads the new schedule from the row. Its schedule starts counting
/// now, as a new deployment's row does: the occurrences of the schedule it replaced are not its own.
pub(crate) fn rescheduled(
    schedule: &ZonedSchedule,
    idle: bool,
    retry_pending: bool,
    next_execution: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Moved {
    Moved {
        next_execution: if idle && !retry_pending {
            schedule.next_after(now)
        } else {
            next_execution
        },
        start_time: now,
    }
}

/// The schedule one row of a rescheduled verb runs from now on ([`retarget`]).
pub(crate) struct Retarget<Z: ToOwned + ?Sized> {
    pub(crate) expression: String,
    /// Its zone, as the store keeps it (its text in the SQL stores, the zone in the in-memory one).
    pub(crate) zone: Z::Owned,
    pub(crate) schedule: ZonedSchedule,
    /// Whether that is an override, not the row's own code's schedule (the row keeps a copy of its
    /// code's while it is).
    pub(crate) overridden: bool,
    /// Whether the row runs something else than it did: where it does not, it is left as it is.
    pub(crate) changes: bool,
}

/// Which schedule a row of a verb ends on when the verb is rescheduled to `target` (expression, zone,
/// schedule), or reset (`None`): the target, else its own `code`'s schedule (`code_schedule` parses
/// it, `None` where the code's text does not parse: the row is left as it is, G8). `runs` is what the
/// row runs now and whether that is an override. `None`: the row does not take it, its code marking
/// the job `fixed` ([`overridable`]). A row that runs it already is left as it is
/// ([`Retarget::changes`]); one that changes goes on where [`rescheduled`] says. A takeover that
/// drops an outlived override resets every row of the verb ([`outlived`]) with this rule too.
pub(crate) fn retarget<Z: PartialEq + ToOwned + ?Sized>(
    target: Option<(&str, &Z, &ZonedSchedule)>,
    code: (&str, &Z),
    code_schedule: impl FnOnce() -> Option<ZonedSchedule>,
    runs: (&str, &Z, bool),
    fixed: bool,
) -> Option<Retarget<Z>> {
    if !overridable(fixed) {
        return None;
    }
    let (expression, zone, schedule) = match target {
        Some((expression, zone, schedule)) => (expression, zone, schedule.clone()),
        None => (code.0, code.1, code_schedule()?),
    };
    let overridden = (expression, zone) != code;
    Some(Retarget {
        expression: expression.to_owned(),
        zone: zone.to_owned(),
        schedule,
        overridden,
        changes: runs != (expression, zone, overridden),
    })
}

/// An override as a new deployment's registration reads it: the expression and zone that run instead
/// of the code's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Override {
    pub(crate) expression: String,
    pub(crate) zone: String,
}

/// The schedule a new row runs.
#[derive(Debug, Clone)]
pub(crate) struct Effective {
    pub(crate) expression: String,
    /// The zone's text, as the SQL stores write it (the in-memory store keeps `schedule`'s zone).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) zone: String,
    pub(crate) schedule: ZonedSchedule,
    /// An override's, not the code's.
    pub(crate) overridden: bool,
}

/// What a deployment's row of an overridden verb runs: the rule of "What wins" (docs/operations.md,
/// "Changing a schedule without a build").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wins {
    /// The override, whatever the code's expression: it wins until it is reset.
    Override,
    /// The code's schedule: the job runs on every replica (from each replica's build), or the override
    /// is the code's own expression and zone.
    Code,
    /// The code's schedule, and the override is dropped: the code marks the job `fixed`, the later
    /// and the more deliberate decision.
    CodeDropsOverride,
}

/// What a row of a verb overridden to `over` runs under a code that declares `expression` in `zone`,
/// on every replica or not, `fixed` or not.
pub(crate) fn wins(
    over: &Override,
    (expression, zone): (&str, &str),
    every_replica: bool,
    fixed: bool,
) -> Wins {
    if fixed {
        Wins::CodeDropsOverride
    } else if every_replica || (over.expression == expression && over.zone == zone) {
        Wins::Code
    } else {
        Wins::Override
    }
}

/// The schedule a new row of `job` starts with: the override of its verb where it wins ([`wins`]),
/// until it is reset, whatever the code says now; else the code's, as for a job whose override does not
/// parse any more (edited by hand), reported.
pub(crate) fn effective(job: &JobSpec, over: Option<&Override>) -> Effective {
    let code = || Effective {
        expression: job.expression.clone(),
        zone: job.zone.name().to_owned(),
        schedule: job.schedule.clone(),
        overridden: false,
    };
    let every_replica = job.on == cron_schema::RunOn::EveryReplica;
    let Some(over) = over.filter(|over| {
        wins(
            over,
            (&job.expression, job.zone.name()),
            every_replica,
            job.fixed,
        ) == Wins::Override
    }) else {
        return code();
    };
    match row_schedule(&over.expression, &over.zone) {
        Ok(schedule) => Effective {
            expression: over.expression.clone(),
            zone: over.zone.clone(),
            schedule,
            overridden: true,
        },
        Err(error) => {
            tracing::error!(
                verb = job.verb,
                schedule = over.expression,
                timezone = over.zone,
                %error,
                "the override of `{}` does not parse (`{}` in `{}`): {error}; the code's \
                 schedule runs",
                job.verb,
                over.expression,
                over.zone
            );
            code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().into()
    }

    #[test]
    fn a_rescheduled_row_ends_on_the_target_or_its_own_codes_schedule() {
        let hourly = check("0 * * * *", "UTC", None).unwrap();
        let daily = || check("0 2 * * *", "UTC", None).ok();
        let unparsable = || None;
        let target = Some(("0 * * * *", "UTC", &hourly));
        let code = ("0 2 * * *", "UTC");
        // The target, kept as an override with the code's copy; a row on it already is left.
        let moved = retarget(target, code, daily, ("0 2 * * *", "UTC", false), false).unwrap();
        assert_eq!(
            (moved.expression.as_str(), moved.zone.as_str()),
            ("0 * * * *", "UTC")
        );
        assert!(moved.overridden && moved.changes);
        let kept = retarget(target, code, daily, ("0 * * * *", "UTC", true), false).unwrap();
        assert!(kept.overridden && !kept.changes);
        // A row whose code declares the target runs it as its code's: not an override.
        let own = retarget(
            target,
            ("0 * * * *", "UTC"),
            daily,
            ("0 * * * *", "UTC", false),
            false,
        );
        let own = own.unwrap();
        assert!(!own.overridden && !own.changes);
        // ... and one that ran it as an override drops its copy of the code's: it changes.
        let copy = retarget(
            target,
            ("0 * * * *", "UTC"),
            daily,
            ("0 * * * *", "UTC", true),
            false,
        );
        assert!(copy.unwrap().changes);
        // A reset: back to its own code's schedule, or left where the code's text does not parse.
        let reset = retarget(None, code, daily, ("0 * * * *", "UTC", true), false).unwrap();
        assert_eq!(reset.expression, "0 2 * * *");
        assert!(!reset.overridden && reset.changes);
        assert!(retarget(None, code, unparsable, ("0 * * * *", "UTC", true), false).is_none());
        // A fixed row takes neither.
        assert!(retarget(target, code, daily, ("0 2 * * *", "UTC", false), true).is_none());
        assert!(retarget(None, code, daily, ("0 * * * *", "UTC", true), true).is_none());
    }

    #[test]
    fn an_idle_row_goes_on_at_the_new_schedules_next_occurrence() {
        let hourly = check("0 * * * *", "UTC", None).unwrap();
        let now = at("2026-03-01T10:20:00Z");
        let old = Some(at("2026-03-02T02:00:00Z"));
        assert_eq!(
            rescheduled(&hourly, true, false, old, now),
            Moved {
                next_execution: Some(at("2026-03-01T11:00:00Z")),
                start_time: now
            }
        );
        // A run in flight or a pending retry decides by its end; the schedule counts from now.
        let kept = Moved {
            next_execution: old,
            start_time: now,
        };
        assert_eq!(rescheduled(&hourly, false, false, old, now), kept);
        assert_eq!(rescheduled(&hourly, true, true, old, now), kept);
    }

    #[test]
    fn an_override_to_the_speaking_codes_own_schedule_keeps_none() {
        let code = ("0 3 * * *", "UTC");
        assert_eq!(overrides_to(("0 3 * * *", "UTC"), code), None);
        assert_eq!(
            overrides_to(("0 2 * * *", "UTC"), code),
            Some(("0 2 * * *", "UTC"))
        );
        assert_eq!(
            overrides_to(("0 3 * * *", "Europe/Berlin"), code),
            Some(("0 3 * * *", "Europe/Berlin"))
        );
    }

    #[test]
    fn a_reschedule_is_refused_only_where_the_active_deployment_lacks_the_verb() {
        assert_eq!(without_its_verb("billing::a", None), None);
        let refused = without_its_verb("billing::a", Some("billing@2")).unwrap();
        assert!(
            refused.contains("`billing@2` has no such verb `billing::a`"),
            "{refused}"
        );
    }

    #[test]
    fn a_takeover_drops_the_overrides_of_the_verbs_its_code_lacks() {
        let overridden = ["billing::a", "billing::b"];
        assert_eq!(
            outlived(overridden, &["billing::b", "billing::c"]),
            ["billing::a"]
        );
        assert!(outlived(overridden, &["billing::a", "billing::b"]).is_empty());
    }

    #[test]
    fn an_override_is_checked_as_the_attribute_is() {
        assert!(check("0 * * * *", "Europe/Paris", None).is_ok());
        let bad = check("61 * * * *", "UTC", None).unwrap_err();
        assert!(bad.contains("61"), "{bad}");
        assert!(check("0 * * * *", "Mars/Olympus", None).is_err());
        let jitter = check("*/10 * * * * *", "UTC", Some(Duration::from_secs(30))).unwrap_err();
        assert!(jitter.contains("jitter"), "{jitter}");
    }
}
