//! Raising events (docs/operations.md, "Notifications"): each is logged once (target
//! `cronverb::event`), counted in `cron_events_total{kind}`, and handed to the application's listeners
//! off the executor's path: a bounded queue to a thread of their own, which calls each listener with
//! its panic caught. A full queue drops the event with a warning and `cron_events_dropped_total`, so a
//! slow or panicking listener never delays or breaks the runtime. What befalls the listeners (a
//! dropped event, a panic) is logged with target [`LISTENER_TARGET`], so that `cronverb::event`
//! carries exactly one line per event. Shutdown closes the queue and waits
//! up to [`EVENT_DRAIN`] for the listeners to hear the events still in it (docs/runtime.md,
//! "Shutdown").

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::metrics;
use crate::event::{Event, EventKind, Listener};
use crate::sync::lock;

/// The target of what befalls the listeners (docs/operations.md, "Notifications"): an event dropped,
/// a listener that panicked, a shutdown that stopped without them. Not `cronverb::event`, whose lines
/// are the events, one each.
pub(super) const LISTENER_TARGET: &str = "cronverb::event::listener";

/// How many events wait for the listeners at most.
pub(super) const EVENT_QUEUE: usize = 1024;

/// How long shutdown waits, in real time, for the listeners to hear the events queued
/// (docs/runtime.md, "Shutdown").
pub(super) const EVENT_DRAIN: Duration = Duration::from_secs(5);

/// Where the executor raises events.
#[derive(Debug)]
pub(crate) struct Events {
    /// The listeners' queue, and what tells that their thread ended; `None` without listeners or once
    /// closed.
    listening: Mutex<Option<Listening>>,
    /// How many events a full queue dropped (`cron_events_dropped_total` counts them too).
    dropped: AtomicU64,
}

/// The listeners' thread as the executor holds it.
#[derive(Debug)]
struct Listening {
    queue: mpsc::Sender<Event>,
    /// Disconnected once the thread has ended: it holds the sender, and drops it as it returns.
    ended: std_mpsc::Receiver<()>,
}

/// The listeners' thread once its queue is closed ([`Events::close`]).
#[derive(Debug)]
pub(super) struct Closed {
    ended: std_mpsc::Receiver<()>,
}

impl Closed {
    /// Waits up to `timeout` of real time for the listeners to hear every event queued before the
    /// close; whether they did. It blocks its thread.
    pub(super) fn wait(self, timeout: Duration) -> bool {
        matches!(
            self.ended.recv_timeout(timeout),
            Err(std_mpsc::RecvTimeoutError::Disconnected)
        )
    }
}

impl Events {
    /// Starts the listeners' thread, if there are listeners, with a queue of `capacity` events. The
    /// thread ends once the queue is closed ([`Events::close`]) or dropped, and emptied.
    pub(super) fn start(listeners: Vec<Listener>, capacity: usize) -> Events {
        let none = || Events {
            listening: Mutex::new(None),
            dropped: AtomicU64::new(0),
        };
        if listeners.is_empty() {
            return none();
        }
        let (queue, mut events) = mpsc::channel::<Event>(capacity.max(1));
        let (ending, ended) = std_mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("cronverb-events".to_owned())
            .spawn(move || {
                let _ending = ending;
                while let Some(event) = events.blocking_recv() {
                    for listener in &listeners {
                        if catch_unwind(AssertUnwindSafe(|| listener(&event))).is_err() {
                            tracing::error!(
                                target: LISTENER_TARGET,
                                kind = event.kind().as_str(),
                                verb = event.verb(),
                                "an event listener panicked; the next events are still heard"
                            );
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => Events {
                listening: Mutex::new(Some(Listening { queue, ended })),
                dropped: AtomicU64::new(0),
            },
            Err(error) => {
                tracing::error!(%error, "could not start the event listeners' thread; events are only logged");
                none()
            }
        }
    }

    /// Closes the queue: the events raised from now on are only logged and counted, and the
    /// listeners' thread ends once it has handed out those already queued. `None` without listeners
    /// or when closed before.
    pub(super) fn close(&self) -> Option<Closed> {
        let Listening { queue, ended } = lock(&self.listening).take()?;
        drop(queue);
        Some(Closed { ended })
    }

    /// Raises `event`: logs it, counts it and queues it for the listeners without waiting.
    pub(super) fn raise(&self, event: Event) {
        let kind = event.kind();
        metrics::event(kind);
        match kind {
            EventKind::Skipped => tracing::warn!(
                target: "cronverb::event",
                kind = kind.as_str(),
                module = event.module(),
                verb = event.verb(),
                scheduled_at = %event.scheduled_at(),
                "{event}"
            ),
            _ => tracing::error!(
                target: "cronverb::event",
                kind = kind.as_str(),
                module = event.module(),
                verb = event.verb(),
                scheduled_at = %event.scheduled_at(),
                "{event}"
            ),
        }
        let listening = lock(&self.listening);
        let Some(Listening { queue, .. }) = listening.as_ref() else {
            return;
        };
        match queue.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                metrics::event_dropped();
                self.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    target: LISTENER_TARGET,
                    kind = kind.as_str(),
                    verb = event.verb(),
                    "the event listeners are behind: {EVENT_QUEUE} events wait; this one is dropped"
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, mpsc as std_mpsc};
    use std::time::Duration;

    use super::*;
    use crate::store::Outcome;

    fn failure(second: i64) -> Event {
        let at = chrono::DateTime::from_timestamp(1_800_000_000 + second, 0).unwrap();
        Event::failed(
            EventKind::Failed,
            Arc::from("test"),
            "test::flaky",
            at,
            Outcome::Failed,
            None,
            1,
        )
    }

    #[test]
    fn a_full_queue_drops_events_without_waiting_and_counts_them() {
        let heard = Arc::new(Mutex::new(0));
        let (taken, first_taken) = std_mpsc::channel::<()>();
        let (release, held) = std_mpsc::channel::<()>();
        let held = Mutex::new((taken, held));
        let counted = Arc::clone(&heard);
        let listener: Listener = Arc::new(move |_: &Event| {
            let (taken, held) = &*held.lock().unwrap();
            let _ = taken.send(());
            let _ = held.recv();
            *counted.lock().unwrap() += 1;
        });
        let events = Events::start(vec![listener], 2);
        // The listener takes the first event and hangs; two wait in the queue; the rest are dropped,
        // and raising never waits.
        events.raise(failure(0));
        first_taken.recv().unwrap();
        for second in 1..10 {
            events.raise(failure(second));
        }
        assert_eq!(events.dropped.load(Ordering::Relaxed), 7);
        for _ in 0..3 {
            release.send(()).unwrap();
        }
        // Closed, the thread hands out the two queued and ends.
        let closed = events.close().unwrap();
        assert!(closed.wait(Duration::from_secs(60)));
        assert_eq!(*heard.lock().unwrap(), 3);
        // Raised after the close: logged and counted only.
        events.raise(failure(10));
        assert!(events.close().is_none());
    }

    #[test]
    fn closing_waits_only_as_long_as_it_is_told_for_a_listener_that_hangs() {
        let (_release, held) = std_mpsc::channel::<()>();
        let held = Mutex::new(held);
        let listener: Listener = Arc::new(move |_: &Event| {
            let _ = held.lock().unwrap().recv();
        });
        let events = Events::start(vec![listener], 2);
        events.raise(failure(0));
        assert!(!events.close().unwrap().wait(Duration::from_millis(1)));
    }
}
