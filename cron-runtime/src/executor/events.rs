//! Raising events (docs/operations.md, "Notifications"): each is logged once (target
//! `cronverb::event`), counted in `cron_events_total{kind}`, and handed to the application's listeners
//! off the executor's path: a bounded queue to a thread of their own, which calls each listener with
//! its panic caught. A full queue drops the event with a warning and `cron_events_dropped_total`, so a
//! slow or panicking listener never delays or breaks the runtime.

use std::panic::{AssertUnwindSafe, catch_unwind};

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
}

impl Events {
    /// Starts the listeners' thread, if there are listeners, with a queue of `capacity` events. The
    /// thread ends once the executor drops its `Events`.
    pub(super) fn start(listeners: Vec<Listener>, capacity: usize) -> Events {
        if listeners.is_empty() {
            return Events { queue: None };
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
            Ok(_) => Events { queue: Some(queue) },
            Err(error) => {
                tracing::error!(%error, "could not start the event listeners' thread; events are only logged");
                Events { queue: None }
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
