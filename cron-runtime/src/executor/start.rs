//! Starting the runs of an instant: the runs claimed for one instant wait in a list of chunks behind
//! one timer ([`wait_for_instant`]); at the instant its task and a helper per other worker take the
//! runs one at a time and start them ([`start_at_instant`], [`start_runs`]).

use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::claimed::{Started, start_one};
use super::clock::Anchor;
use super::runs::{Chunk, Ended, InFlight, Run};
use super::shared::Shared;
use super::shutdown::give_back;
use crate::store::Store;
use crate::sync::{into_inner, lock};

/// How long before its instant a timer fires: tokio's timer has millisecond ticks, rounds deadlines up to
/// the next one, and a parked worker wakes on the millisecond too: a timer fires up to about two
/// milliseconds after its deadline (docs/runtime.md, "When a handler starts"). From its wake-up the
/// timer's task waits for the exact instant ([`hold_until`]).
const TIMER_EARLY: Duration = Duration::from_millis(5);

/// The runs due at one instant are started in chunks of this many, each chunk by one task.
pub(super) const START_CHUNK: usize = 512;

/// Puts `runs`, a chunk of runs of one claim (whose clock offset is `anchor`) due at the instant `at`,
/// in flight and in the list of their instant; a new list gets its timer.
pub(super) fn wait_for_instant<S: Store>(
    shared: &Arc<Shared<S>>,
    runs: Vec<Run>,
    at: DateTime<Utc>,
    anchor: Anchor,
) {
    // In flight before they can start, so that none leaves `in_flight` before it is there.
    shared.in_flight.insert_all(runs.iter().map(|run| {
        let entry = InFlight {
            abort: None,
            state: Arc::clone(&run.state),
        };
        (run.run_id, entry)
    }));
    let chunk = Chunk {
        runs: runs.into_iter().map(|run| Mutex::new(Some(run))).collect(),
        next: AtomicUsize::new(0),
        anchor,
    };
    let mut waiting = lock(&shared.waiting);
    match waiting.entry(at) {
        Entry::Occupied(mut list) => list.get_mut().push(chunk),
        Entry::Vacant(list) => {
            list.insert(vec![chunk]);
            tokio::spawn(start_at_instant(
                Arc::clone(shared),
                at,
                anchor.instant_for(at),
            ));
        }
    }
}

/// At `start_at` (the instant `at` on the local clock), starts the runs waiting for `at`; gives them
/// back unstarted if shutdown comes first.
///
/// Its timer fires [`TIMER_EARLY`] before the instant, and it holds its worker until the instant
/// ([`hold_until`]). With two runs or more due, it spawns a helper per other worker (at least one),
/// which take the runs one at a time with it: a handler that blocks its thread in its first poll then
/// holds up its own run only, and the other starters start the rest (docs/runtime.md, "Handlers that
/// block").
async fn start_at_instant<S: Store>(shared: Arc<Shared<S>>, at: DateTime<Utc>, start_at: Instant) {
    let mut shutdown = shared.stopping.signal.clone();
    let early = start_at.checked_sub(TIMER_EARLY).unwrap_or(start_at);
    let released = tokio::select! {
        biased;
        _ = shutdown.wait_for(|stop| *stop) => true,
        () = tokio::time::sleep_until(early) => false,
    };
    let handoff = Arc::new(Handoff {
        chunks: OnceLock::new(),
        starters: AtomicUsize::new(1),
    });
    if !released {
        let runs: usize = lock(&shared.waiting).get(&at).map_or(0, |chunks| {
            chunks.iter().map(|chunk| chunk.runs.len()).sum()
        });
        if runs >= 2 {
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            let helpers = workers.saturating_sub(1).max(1);
            handoff.starters.store(1 + helpers, Ordering::Release);
            for helper in 1..=helpers {
                shared.ended.starting.fetch_add(1, Ordering::AcqRel);
                let handoff = Arc::clone(&handoff);
                tokio::spawn(start_as_helper(
                    Arc::clone(&shared),
                    handoff,
                    helper,
                    start_at,
                ));
            }
            leave_lifo_slot();
        }
        hold_until(start_at).await;
    }
    // Runs claimed for this instant from now on make a new list, whose timer fires at once.
    let chunks = lock(&shared.waiting).remove(&at).unwrap_or_default();
    if released || *shutdown.borrow() {
        let _ = handoff.chunks.set(Vec::new());
        let runs: Vec<Run> = chunks
            .into_iter()
            .flat_map(|chunk| chunk.runs)
            .filter_map(into_inner)
            .collect();
        let ids: Vec<i64> = runs.iter().map(|run| run.run_id).collect();
        for run in &runs {
            run.span
                .in_scope(|| tracing::debug!("released before it started: shutting down"));
        }
        tokio::spawn(give_back(shared, ids));
        return;
    }
    shared.ended.starting.fetch_add(1, Ordering::AcqRel);
    let _ = handoff.chunks.set(chunks);
    start_runs(&shared, &handoff, 0, start_at);
}

/// The runs of one instant, handed from [`start_at_instant`] to its helpers at the instant.
struct Handoff {
    chunks: OnceLock<Vec<Chunk>>,
    /// How many starters there are: the timer's task and its helpers.
    starters: AtomicUsize,
}

/// Helps [`start_at_instant`] start the runs due at `start_at`, as starter number `starter`.
async fn start_as_helper<S: Store>(
    shared: Arc<Shared<S>>,
    handoff: Arc<Handoff>,
    starter: usize,
    start_at: Instant,
) {
    // Not held at the instant as the timer's task is: with every core of a small machine held at the
    // instant, a worker is preempted by another thread of the machine in the middle of the starts
    // (docs/benchmarks.md, "Handlers that cannot stall the runtime"). A helper joins when its timer
    // fires, a millisecond or two after the instant.
    tokio::time::sleep_until(start_at).await;
    while handoff.chunks.get().is_none() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    start_runs(&shared, &handoff, starter, start_at);
}

/// Starts the runs due at `start_at`, one at a time, until none is left.
///
/// The clock is read once per run, before it starts: that reading is also the end of the run before,
/// if that one ended on its first poll (it ended before the reading: never early, so that no occurrence
/// it overlapped runs).
///
/// Starter number `starter` takes the chunks `starter`, `starter + starters`, … first, so that starters
/// do not take turns in one chunk, then every chunk for what is left: the rest of a chunk whose starter
/// is held up by a handler that blocks its thread.
fn start_runs<S: Store>(
    shared: &Arc<Shared<S>>,
    handoff: &Handoff,
    starter: usize,
    start_at: Instant,
) {
    let chunks = handoff.chunks.get().map_or(&[][..], Vec::as_slice);
    let starters = handoff.starters.load(Ordering::Acquire).max(1);
    let order = (starter..chunks.len())
        .step_by(starters)
        .chain(0..chunks.len());
    // Room for the runs of this starter's own chunks at once: grown by doubling, a starter's queue of
    // 5,000 ended runs held room for 8,192 (docs/benchmarks.md, "Where the memory went").
    let own: usize = (starter..chunks.len())
        .step_by(starters)
        .map(|index| chunks[index].runs.len())
        .sum();
    shared.ended.reserve(starter, own);
    // The run before, ended on its first poll, with its claim's clock offset: stamped with the next
    // reading of the clock.
    let mut unstamped: Option<(Ended, Anchor)> = None;
    // Whether a task this starter spawned or woke last (a handler's own, the recorder) may be in this
    // worker's LIFO slot: it leaves it before the next handler, which may block this worker.
    let mut in_lifo_slot = false;
    for chunk in order.map(|index| &chunks[index]) {
        while let Some(slot) = chunk.runs.get(chunk.next.fetch_add(1, Ordering::AcqRel)) {
            let now = Instant::now();
            if let Some((mut ended, anchor)) = unstamped.take() {
                ended.ended_at(now, anchor);
                in_lifo_slot |= shared.ended.push(starter, [ended]);
            }
            let Some(run) = lock(slot).take() else {
                continue;
            };
            if std::mem::take(&mut in_lifo_slot) {
                leave_lifo_slot();
            }
            match start_one(shared, run, chunk.anchor, start_at, now) {
                Started::Ended(ended) => unstamped = Some((ended, chunk.anchor)),
                Started::Spawned => in_lifo_slot = true,
                Started::Nothing => {}
            }
        }
    }
    if let Some((mut ended, anchor)) = unstamped {
        ended.ended_at(Instant::now(), anchor);
        shared.ended.push(starter, [ended]);
    }
    shared.ended.started(starter);
    shared.ended.starting.fetch_sub(1, Ordering::AcqRel);
}

/// Moves the task this worker spawned or woke last out of its LIFO slot, from which no other worker can
/// take it, to the queue the others take from, and wakes one of them: spawning an empty task takes the
/// slot's place. Called before something that may block this worker (a handler's first poll), so that
/// the task does not wait for it (docs/runtime.md, "Handlers that block").
#[inline]
fn leave_lifo_slot() {
    drop(tokio::spawn(async {}));
}

/// Waits for `at`, at most [`TIMER_EARLY`] away, neither before it nor a timer tick after it, by
/// holding this worker: tokio's timer is not that precise, and a worker left idle is slow to wake. Its
/// other tasks can be stolen by the other workers meanwhile.
async fn hold_until(at: Instant) {
    let left = at
        .saturating_duration_since(Instant::now())
        .min(TIMER_EARLY);
    let until = std::time::Instant::now() + left;
    while std::time::Instant::now() < until {
        // Other threads of the machine that are ready to run get the core now, while holding it is
        // idle, rather than preempting this worker while it starts runs.
        std::thread::yield_now();
    }
    if Instant::now() < at {
        // tokio's clock is paused (tests): it moves when every task sleeps.
        tokio::time::sleep_until(at).await;
    }
}
