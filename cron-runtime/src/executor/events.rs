//! Raising events (docs/operations.md, "Notifications"): each is logged once (target
//! `cronverb::event`), counted in `cron_events_total{kind}`, and handed to the application's listeners
//! off the executor's path: a bounded queue to a thread of their own, which calls each listener with
//! its panic caught. A full queue drops the event with a warning and `cron_events_dropped_total`, so a
//! slow or panicking listener never delays or breaks the runtime.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::metrics;
use crate::event::{Event, EventKind, Listener};

/// How many events wait for the listeners at most.
pub(super) const EVENT_QUEUE: usize = 1024;

/// Where the executor raises events.
#[derive(Debug)]
pub(crate) struct Events {
    /// The listeners' queue; `None` without listeners.
    queue: Option<mpsc::Sender<Event>>,
    /// How many events a full queue dropped (`cron_events_dropped_total` counts them too).
    dropped: AtomicU64,
}

impl Events {
    /// Starts the listeners' thread, if there are listeners, with a queue of `capacity` events. The
    /// thread ends once the executor drops its `Events`.
    pub(super) fn start(listeners: Vec<Listener>, capacity: usize) -> Events {
        if listeners.is_empty() {
            return Events {
                queue: None,
                dropped: AtomicU64::new(0),
            };
        }
        let (queue, mut events) = mpsc::channel::<Event>(capacity.max(1));
        let spawned = std::thread::Builder::new()
            .name("cronverb-events".to_owned())
            .spawn(move || {
                while let Some(event) = events.blocking_recv() {
                    for listener in &listeners {
                        if catch_unwind(AssertUnwindSafe(|| listener(&event))).is_err() {
                            tracing::error!(
                                target: "cronverb::event",
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
                queue: Some(queue),
                dropped: AtomicU64::new(0),
            },
            Err(error) => {
                tracing::error!(%error, "could not start the event listeners' thread; events are only logged");
                Events {
                    queue: None,
                    dropped: AtomicU64::new(0),
                }
            }
        }
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
        let Some(queue) = &self.queue else {
            return;
        };
        match queue.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                metrics::event_dropped();
                self.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    target: "cronverb::event",
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
        let (release, held) = std_mpsc::channel::<()>();
        let held = Mutex::new(held);
        let counted = Arc::clone(&heard);
        let listener: Listener = Arc::new(move |_: &Event| {
            let _ = held.lock().unwrap().recv();
            *counted.lock().unwrap() += 1;
        });
        let events = Events::start(vec![listener], 2);
        // The listener takes the first event and hangs; two wait in the queue; the rest are dropped,
        // and raising never waits.
        events.raise(failure(0));
        std::thread::sleep(Duration::from_millis(100));
        for second in 1..10 {
            events.raise(failure(second));
        }
        assert_eq!(events.dropped.load(Ordering::Relaxed), 7);
        for _ in 0..3 {
            release.send(()).unwrap();
        }
        drop(events);
        for _ in 0..500 {
            if *heard.lock().unwrap() == 3 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(*heard.lock().unwrap(), 3);
    }
}
