//! What a held run of a replaced deployment leaves to the active one, decided once for every store
//! (G6, docs/operations.md): a takeover carries each unchanged verb's row past the occurrence then in
//! flight, so when that run is given back, its occurrence (or a manual run's trigger) goes to the
//! active deployment's row of the verb, and when it ends, that row goes on after it. The ending says
//! what is carried ([`Carry`], in [`Ending::carry`](super::Ending::carry)); the store reads the active
//! row's facts under its lock ([`ActiveRow`]) and writes what [`Carry::onto`] computes.

use chrono::{DateTime, Utc};

use crate::store::RETRIES_CUT_SHORT;

/// What a held run of a replaced deployment leaves to the active deployment's row of its verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// A manual run given back: its trigger (at this instant) is pending again there, the row that
    /// takes the verb's triggers since the takeover moved them (docs/operations.md, "Manual runs").
    Trigger(DateTime<Utc>),
    /// A regular occurrence given back: the row runs it, where the verb's schedule is unchanged.
    Occurrence(DateTime<Utc>),
    /// A run that ended, whose job's next occurrence is this one: the row of the unchanged verb goes on
    /// there when that is later, so that an occurrence the run skipped is not run there after all.
    ContinueAt(DateTime<Utc>),
    /// A pending retry given back (its attempt was claimed ahead and never started), due at this
    /// instant: it goes with its verb, as a takeover moves pending retries (docs/runtime.md,
    /// "Retries"), to the row if it is idle and holds no other retry; otherwise its occurrence ends
    /// `failed`, its retries cut short ([`Carry::refused`]). Left on the replaced row, nothing would
    /// ever claim it, and its run would stay `running`.
    Retry(DateTime<Utc>),
}

/// The active deployment's row of the verb, as a store reads it under its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActiveRow {
    /// No run holds it.
    pub(crate) idle: bool,
    /// Its schedule (expression and zone) is the replaced row's: an unchanged verb.
    pub(crate) same_schedule: bool,
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) trigger: Option<DateTime<Utc>>,
    /// It holds a pending retry (docs/runtime.md, "Retries"), at its `next_execution`, which nothing
    /// else moves.
    pub(crate) holds_retry: bool,
}

/// The active row's `next_execution` and pending trigger from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActiveWrite {
    pub(crate) next_execution: Option<DateTime<Utc>>,
    pub(crate) trigger: Option<DateTime<Utc>>,
    /// The row holds the carried retry ([`Carry::Retry`]) from now on: the run is its.
    pub(crate) retry: bool,
}

impl Carry {
    /// What the active deployment's `row` becomes; `None` when it stays as it is. A trigger goes to the
    /// row whatever its state (a claim takes it when the row is idle), unless one is pending there
    /// already; an occurrence, or where to go on, only to an idle row of an unchanged verb that holds
    /// no retry.
    pub(crate) fn onto(self, row: &ActiveRow) -> Option<ActiveWrite> {
        let write = |next_execution, trigger| ActiveWrite {
            next_execution,
            trigger,
            retry: false,
        };
        let schedules = row.idle && row.same_schedule && !row.holds_retry;
        match self {
            Carry::Trigger(at) if row.trigger.is_none() => {
                Some(write(row.next_execution, Some(at)))
            }
            Carry::Trigger(_) => None,
            Carry::Occurrence(at) if schedules && row.next_execution.is_none_or(|n| at < n) => {
                Some(write(Some(at), row.trigger))
            }
            Carry::ContinueAt(next)
                if schedules && row.next_execution.is_some_and(|n| n < next) =>
            {
                Some(write(Some(next), row.trigger))
            }
            Carry::Occurrence(_) | Carry::ContinueAt(_) => None,
            Carry::Retry(at) if row.idle && !row.holds_retry => Some(ActiveWrite {
                retry: true,
                ..write(Some(at), row.trigger)
            }),
            Carry::Retry(_) => None,
        }
    }

    /// Why a carried retry of `verb` is not the active deployment's `row`'s (`None`: that deployment
    /// has no row of the verb), as the error its occurrence ends `failed` with; `None` for any other
    /// carry, or a retry the row takes ([`Carry::onto`]).
    pub(crate) fn refused(self, row: Option<&ActiveRow>, verb: &str) -> Option<String> {
        let Carry::Retry(_) = self else {
            return None;
        };
        let why = match row {
            None => "has no verb",
            Some(row) if !row.idle => "is running",
            Some(row) if row.holds_retry => "holds another retry of",
            Some(_) => return None,
        };
        Some(retries_cut_short(why, verb))
    }
}

/// The error of an occurrence whose pending retry no row of the deployment that took its module over
/// takes, `why` said of its `verb` (docs/runtime.md, "Retries").
pub(crate) fn retries_cut_short(why: &str, verb: &str) -> String {
    format!("{RETRIES_CUT_SHORT}: the deployment that took the module over {why} `{verb}`")
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, s).unwrap()
    }

    const ROW: ActiveRow = ActiveRow {
        idle: true,
        same_schedule: true,
        next_execution: None,
        trigger: None,
        holds_retry: false,
    };

    #[test]
    fn a_given_back_occurrence_goes_to_an_unchanged_idle_row_at_the_earlier_instant() {
        let row = ActiveRow {
            next_execution: Some(at(2)),
            ..ROW
        };
        let to = |at| {
            Some(ActiveWrite {
                next_execution: Some(at),
                trigger: None,
                retry: false,
            })
        };
        assert_eq!(Carry::Occurrence(at(1)).onto(&row), to(at(1)));
        assert_eq!(Carry::Occurrence(at(3)).onto(&row), None);
        assert_eq!(Carry::Occurrence(at(3)).onto(&ROW), to(at(3)));
        for row in [
            ActiveRow { idle: false, ..row },
            ActiveRow {
                same_schedule: false,
                ..row
            },
            ActiveRow {
                holds_retry: true,
                ..row
            },
        ] {
            assert_eq!(Carry::Occurrence(at(1)).onto(&row), None);
            assert_eq!(Carry::ContinueAt(at(3)).onto(&row), None);
        }
        // After a run ended, only later.
        assert_eq!(Carry::ContinueAt(at(3)).onto(&row), to(at(3)));
        assert_eq!(Carry::ContinueAt(at(2)).onto(&row), None);
        assert_eq!(Carry::ContinueAt(at(3)).onto(&ROW), None);
    }

    #[test]
    fn a_given_back_trigger_goes_to_the_active_row_unless_one_is_pending() {
        let row = ActiveRow {
            idle: false,
            same_schedule: false,
            next_execution: Some(at(9)),
            ..ROW
        };
        assert_eq!(
            Carry::Trigger(at(1)).onto(&row),
            Some(ActiveWrite {
                next_execution: Some(at(9)),
                trigger: Some(at(1)),
                retry: false,
            })
        );
        let triggered = ActiveRow {
            trigger: Some(at(5)),
            ..row
        };
        assert_eq!(Carry::Trigger(at(1)).onto(&triggered), None);
    }

    #[test]
    fn a_given_back_retry_goes_to_an_idle_row_holding_none_or_its_occurrence_ends() {
        let row = ActiveRow {
            next_execution: Some(at(9)),
            same_schedule: false,
            ..ROW
        };
        assert_eq!(
            Carry::Retry(at(3)).onto(&row),
            Some(ActiveWrite {
                next_execution: Some(at(3)),
                trigger: None,
                retry: true,
            })
        );
        assert_eq!(Carry::Retry(at(3)).refused(Some(&row), "a"), None);
        let refused = |row: Option<&ActiveRow>| {
            assert_eq!(row.and_then(|row| Carry::Retry(at(3)).onto(row)), None);
            Carry::Retry(at(3)).refused(row, "a").unwrap()
        };
        assert!(refused(None).ends_with("took the module over has no verb `a`"));
        let running = ActiveRow { idle: false, ..row };
        assert!(refused(Some(&running)).ends_with("is running `a`"));
        let holding = ActiveRow {
            holds_retry: true,
            ..row
        };
        assert!(refused(Some(&holding)).ends_with("holds another retry of `a`"));
        assert!(refused(None).starts_with(RETRIES_CUT_SHORT));
        assert_eq!(Carry::Occurrence(at(3)).refused(None, "a"), None);
    }
}
