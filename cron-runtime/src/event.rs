//! What the runtime tells an application's listeners ([`RuntimeBuilder::on_event`]): the events an
//! on-call person needs, each heard once across the replicas, by the replica that recorded the fact
//! (docs/operations.md, "Notifications").
//!
//! [`RuntimeBuilder::on_event`]: crate::RuntimeBuilder::on_event

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::Outcome;

/// What happened ([`Event::kind`]). Its `Display` is the name logs, metrics (`cron_events_total{kind}`)
/// and a webhook's JSON use: `failed`, `retries_exhausted`, `skipped`, `overdue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// An attempt of an occurrence failed, panicked or timed out. An attempt taken back from a
    /// replica that died (`abandoned`) raises none; the retries after it raise theirs.
    Failed,
    /// The last attempt of an occurrence of a job with retries failed: no retry follows. It takes the
    /// place of that attempt's [`Failed`](EventKind::Failed); a job without retries raises only
    /// `Failed`.
    RetriesExhausted,
    /// Occurrences were skipped: missed while no replica ran them, or while a run went on (overlap).
    Skipped,
    /// An occurrence has not succeeded `expect_within` after its instant (docs/operations.md,
    /// "Overdue").
    Overdue,
}

impl EventKind {
    /// The kind's name: `failed`, `retries_exhausted`, `skipped`, `overdue`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Failed => "failed",
            EventKind::RetriesExhausted => "retries_exhausted",
            EventKind::Skipped => "skipped",
            EventKind::Overdue => "overdue",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why occurrences were skipped ([`Event::skip_reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipReason {
    /// Missed: late, and the job's policy (`missed`, its catch-up window) does not run them.
    Missed,
    /// A run of the job was still going on at their instants.
    Overlap,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SkipReason::Missed => "missed",
            SkipReason::Overlap => "overlap",
        })
    }
}

/// One event of a job: what happened ([`kind`](Event::kind)), to which job and occurrence, and the
/// details of its kind. Its `Display` is one line a person can read in a chat message:
///
/// ```text
/// failed: `billing::charge_cards` (module billing) at 2026-03-08T02:00:00Z, attempt 1: card processor unreachable
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    kind: EventKind,
    module: Arc<str>,
    verb: String,
    scheduled_at: DateTime<Utc>,
    outcome: Option<Outcome>,
    error: Option<String>,
    attempt: u32,
    skipped: u32,
    skip_reason: Option<SkipReason>,
    expect_within: Option<Duration>,
}

impl Event {
    fn new(kind: EventKind, module: Arc<str>, verb: &str, scheduled_at: DateTime<Utc>) -> Event {
        Event {
            kind,
            module,
            verb: verb.to_owned(),
            scheduled_at,
            outcome: None,
            error: None,
            attempt: 0,
            skipped: 0,
            skip_reason: None,
            expect_within: None,
        }
    }

    /// An attempt that failed (`retries_exhausted`: the last one).
    pub(crate) fn failed(
        kind: EventKind,
        module: Arc<str>,
        verb: &str,
        scheduled_at: DateTime<Utc>,
        outcome: Outcome,
        error: Option<&str>,
        attempt: u32,
    ) -> Event {
        Event {
            outcome: Some(outcome),
            error: error.map(str::to_owned),
            attempt,
            ..Event::new(kind, module, verb, scheduled_at)
        }
    }

    /// `count` occurrences skipped, from `scheduled_at`'s.
    pub(crate) fn skips(
        module: Arc<str>,
        verb: &str,
        scheduled_at: DateTime<Utc>,
        count: u32,
        reason: SkipReason,
    ) -> Event {
        Event {
            skipped: count,
            skip_reason: Some(reason),
            ..Event::new(EventKind::Skipped, module, verb, scheduled_at)
        }
    }

    /// Occurrence `scheduled_at` has not succeeded within `within`.
    pub(crate) fn overdue(
        module: Arc<str>,
        verb: &str,
        scheduled_at: DateTime<Utc>,
        within: Duration,
    ) -> Event {
        Event {
            expect_within: Some(within),
            ..Event::new(EventKind::Overdue, module, verb, scheduled_at)
        }
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The job's verb (`billing::charge_cards`).
    pub fn verb(&self) -> &str {
        &self.verb
    }

    /// The job's module (`billing`).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The occurrence the event is about: the one that failed, is overdue, or the first skipped
    /// occurrence's run (for overlap, the run that went on).
    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.scheduled_at
    }

    /// How the attempt ended (`failed`, `retries_exhausted`): failed, panicked or timed out.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// The attempt's error or panic message (`failed`, `retries_exhausted`).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Which attempt of the occurrence failed, 1 for the first (`failed`, `retries_exhausted`); 0
    /// for the other kinds.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How many occurrences were skipped (`skipped`); 0 for the other kinds.
    pub fn skipped(&self) -> u32 {
        self.skipped
    }

    /// Why they were skipped (`skipped`).
    pub fn skip_reason(&self) -> Option<SkipReason> {
        self.skip_reason
    }

    /// The job's `expect_within` (`overdue`).
    pub fn expect_within(&self) -> Option<Duration> {
        self.expect_within
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self
            .scheduled_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        write!(
            f,
            "{}: `{}` (module {}) at {at}",
            self.kind, self.verb, self.module
        )?;
        match self.kind {
            EventKind::Failed | EventKind::RetriesExhausted => {
                write!(f, ", attempt {}", self.attempt)?;
                if let Some(outcome) = self.outcome
                    && outcome != Outcome::Failed
                {
                    write!(f, " {}", outcome.as_str())?;
                }
                if let Some(error) = &self.error {
                    // One line: a message's line breaks would split the chat line.
                    write!(f, ": {}", error.replace(['\n', '\r'], " "))?;
                }
                Ok(())
            }
            EventKind::Skipped => {
                let reason = self.skip_reason.unwrap_or(SkipReason::Missed);
                let s = if self.skipped == 1 { "" } else { "s" };
                write!(f, ": {} occurrence{s} skipped ({reason})", self.skipped)
            }
            EventKind::Overdue => match self.expect_within {
                Some(within) => write!(
                    f,
                    ": not succeeded within {} of its instant",
                    cron_schema::format_duration(within)
                ),
                None => Ok(()),
            },
        }
    }
}

/// A listener given to [`RuntimeBuilder::on_event`](crate::RuntimeBuilder::on_event).
pub(crate) type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// The listeners of a runtime, in the order given.
#[derive(Clone, Default)]
pub(crate) struct Listeners(pub(crate) Vec<Listener>);

impl fmt::Debug for Listeners {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} listeners", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-03-08T02:00:00Z".parse().unwrap()
    }

    #[test]
    fn each_kind_reads_as_one_line() {
        let module: Arc<str> = Arc::from("billing");
        let failed = Event::failed(
            EventKind::Failed,
            Arc::clone(&module),
            "billing::charge",
            at(),
            Outcome::Failed,
            Some("card processor\nunreachable"),
            1,
        );
        assert_eq!(
            failed.to_string(),
            "failed: `billing::charge` (module billing) at 2026-03-08T02:00:00Z, attempt 1: card \
             processor unreachable"
        );
        let exhausted = Event::failed(
            EventKind::RetriesExhausted,
            Arc::clone(&module),
            "billing::charge",
            at(),
            Outcome::TimedOut,
            None,
            4,
        );
        assert_eq!(
            exhausted.to_string(),
            "retries_exhausted: `billing::charge` (module billing) at 2026-03-08T02:00:00Z, attempt \
             4 timed_out"
        );
        let skipped = Event::skips(
            Arc::clone(&module),
            "billing::charge",
            at(),
            3,
            SkipReason::Overlap,
        );
        assert_eq!(
            skipped.to_string(),
            "skipped: `billing::charge` (module billing) at 2026-03-08T02:00:00Z: 3 occurrences \
             skipped (overlap)"
        );
        let overdue = Event::overdue(module, "billing::charge", at(), Duration::from_secs(900));
        assert_eq!(
            overdue.to_string(),
            "overdue: `billing::charge` (module billing) at 2026-03-08T02:00:00Z: not succeeded \
             within 15m of its instant"
        );
        assert_eq!(
            [
                EventKind::Failed,
                EventKind::RetriesExhausted,
                EventKind::Skipped,
                EventKind::Overdue
            ]
            .map(|kind| kind.to_string()),
            ["failed", "retries_exhausted", "skipped", "overdue"]
        );
    }
}
