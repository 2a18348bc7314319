//! How work is spread over the live replicas of a deployment (docs/runtime.md, "How work is spread"):
//! each occurrence has one owner among them, a claim takes another replica's only once it is the grace
//! past its start, a finish chains only the occurrences its runner owns, and a replica whose heartbeat
//! stopped is counted out after its lease.

use std::collections::BTreeSet;
use std::time::Duration;

use cron_runtime::store::{Finishing, Store};

use super::*;

/// The jobs of the cases: eight due every second, a share for each of two replicas.
fn eight_jobs() -> DeploymentSpec {
    deployment(
        "billing@1",
        (0..8).map(|i| job(&format!("job{i}"), SECONDLY)).collect(),
    )
}

fn verb_set(claims: &[Claim]) -> BTreeSet<String> {
    claims.iter().map(|c| c.verb.clone()).collect()
}

/// Records `claims` as succeeded in one call, chaining what is due within `chain`; the claims chained.
async fn finish_chaining<S: Store>(
    store: &S,
    runner: &Runner,
    claims: &[Claim],
    chain: Option<Duration>,
) -> Vec<Claim> {
    let finishes: Vec<Finish> = claims.iter().map(succeeded).collect();
    let Finishing { results, claimed } = store.finish(runner, &finishes, chain).await;
    for result in results {
        assert!(
            matches!(result, Ok(Finished::Recorded { .. })),
            "{result:?}"
        );
    }
    claimed.map(|c| c.claims).unwrap_or_default()
}

/// How many of the verbs of `a` are in `b`.
fn shared(a: &BTreeSet<String>, b: &BTreeSet<String>) -> usize {
    a.intersection(b).count()
}

/// Two replicas of `spec` with `settings`, each counting the other live, registered early in a minute
/// (every job changes hands at the start of a minute: a case keeps within one). The second counts the
/// first in as it registers; the first counts it in at its heartbeat here.
async fn two_live_replicas<H: StoreUnderTest>(
    h: &H,
    settings: StoreSettings,
    spec: &DeploymentSpec,
) -> ((H::Store, Runner), (H::Store, Runner)) {
    settle_where(h, |second| second % 60 < 50).await;
    let (a_store, a) = replica_with(h, settings, spec).await;
    let (b_store, b) = replica_with(h, settings, spec).await;
    a_store.heartbeat(&a).await.unwrap();
    ((a_store, a), (b_store, b))
}

pub async fn live_replicas_split_the_due_occurrences_and_take_a_silent_ones_past_the_grace(
    h: impl StoreUnderTest,
) {
    let spec = eight_jobs();
    let all: BTreeSet<String> = spec.jobs.iter().map(|j| j.verb.clone()).collect();
    // Every job changes hands at the start of a minute: the case keeps within one.
    let ((a_store, a), (b_store, b)) = two_live_replicas(&h, defaults(), &spec).await;

    // Each replica takes its own share of the occurrences due, and nothing of the other's.
    let at = h.next_execution(MODULE, "job0").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let a_first = claim(&a_store, &a).await.claims;
    let b_first = claim(&b_store, &b).await.claims;
    let (a_own, b_own) = (verb_set(&a_first), verb_set(&b_first));
    assert!(
        (2..=6).contains(&a_own.len()) && (2..=6).contains(&b_own.len()),
        "{a_own:?} {b_own:?}"
    );
    assert_eq!(shared(&a_own, &b_own), 0, "{a_own:?} {b_own:?}");
    assert_eq!(
        a_own.union(&b_own).cloned().collect::<BTreeSet<_>>(),
        all,
        "every occurrence has one owner"
    );
    finish_chaining(&a_store, &a, &a_first, None).await;
    finish_chaining(&b_store, &b, &b_first, None).await;

    // The second replica goes silent: live, but it claims nothing (frozen, or too busy). Within the
    // grace after their start, the first takes only its own; past the grace it takes the silent
    // one's too.
    let next = at + TimeDelta::seconds(1);
    sleep_until(&h, next + ms(100)).await;
    let mine = claim(&a_store, &a).await.claims;
    let theirs = {
        let early = verb_set(&mine);
        assert_eq!(early, a_own);
        sleep_until(&h, next + ms(600)).await;
        claim(&a_store, &a).await.claims
    };
    let (early, late) = (verb_set(&mine), verb_set(&theirs));
    assert_eq!(shared(&early, &late), 0, "{early:?} {late:?}");
    assert_eq!(
        early.union(&late).cloned().collect::<BTreeSet<_>>(),
        all,
        "the silent replica's share was taken past the grace"
    );
    assert_eq!(late, b_own);
    for claim in mine.iter().chain(&theirs) {
        assert_eq!((claim.scheduled_at, claim.late), (next, false), "{claim:?}");
    }

    // Its finish chains the next occurrences it owns, and leaves the silent one's idle for their
    // owner (a store may chain nothing: then the claims take its own too).
    let both: Vec<Claim> = mine.iter().chain(&theirs).cloned().collect();
    let chained =
        verb_set(&finish_chaining(&a_store, &a, &both, Some(Duration::from_secs(1))).await);
    assert!(
        chained.is_empty() || chained == a_own,
        "{chained:?} {a_own:?}"
    );
    // The silent replica comes back: its claim ahead takes its share of the next occurrences.
    b_store.heartbeat(&b).await.unwrap();
    let b_back = claim_ahead(&b_store, &b).await.claims;
    let a_ahead = claim_ahead(&a_store, &a).await.claims;
    let (b_back, a_ahead) = (verb_set(&b_back), verb_set(&a_ahead));
    assert_eq!(b_back, b_own);
    assert_eq!(shared(&b_back, &a_ahead) + shared(&b_back, &chained), 0);
    assert_eq!(
        b_back
            .iter()
            .chain(&a_ahead)
            .chain(&chained)
            .cloned()
            .collect::<BTreeSet<_>>(),
        all,
        "each occurrence was claimed once"
    );
}

pub async fn a_replica_whose_heartbeat_stopped_is_counted_out_after_its_lease(
    h: impl StoreUnderTest,
) {
    let spec = eight_jobs();
    let ((a_store, a), (b_store, b)) = two_live_replicas(&h, short_lease(), &spec).await;
    let at = h.next_execution(MODULE, "job0").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    let a_share = claim(&a_store, &a).await.claims;
    let b_share = claim(&b_store, &b).await.claims;
    assert!(a_share.len() < 8, "{:?}", verb_set(&a_share));
    finish_chaining(&a_store, &a, &a_share, None).await;
    finish_chaining(&b_store, &b, &b_share, None).await;

    // The second replica never heartbeats again: once its lease (two seconds) has passed, the
    // first replica's heartbeat counts it out. It catches up on the occurrences left (past their
    // start, anyone's), and from then on claims every occurrence ahead of its start.
    sleep_until(&h, at + TimeDelta::seconds(3)).await;
    a_store.heartbeat(&a).await.unwrap();
    let caught_up = claim(&a_store, &a).await.claims;
    assert_eq!(caught_up.len(), 8, "{:?}", verb_set(&caught_up));
    finish_chaining(&a_store, &a, &caught_up, None).await;
    let next = h.next_execution(MODULE, "job0").await.unwrap();
    assert!(next > h.now().await);
    sleep_until(&h, next - ms(500)).await;
    let alone = claim_ahead(&a_store, &a).await.claims;
    assert_eq!(alone.len(), 8, "{:?}", verb_set(&alone));
    assert!(alone.iter().all(|c| c.scheduled_at == next), "{alone:?}");
}

pub async fn a_replica_that_owns_nothing_due_is_told_when_its_claim_may_take_another_ones(
    h: impl StoreUnderTest,
) {
    let spec = eight_jobs();
    let (_silent, (b_store, b)) = two_live_replicas(&h, defaults(), &spec).await;
    // The first replica is silent. The second claims its own share ahead of the start, and is told
    // when the silent one's share is due to it.
    let ahead = Duration::from_millis(500);
    let look_ahead = TimeDelta::from_std(ahead).unwrap();
    let at = h.next_execution(MODULE, "job0").await.unwrap();
    sleep_until(&h, at - ms(400)).await;
    let own = b_store.claim_due(&b, ahead, 100).await.unwrap();
    assert!((2..=6).contains(&own.claims.len()), "{own:?}");
    let next_due = own.next_due.expect("the silent replica's share is idle");
    // Not later either: the silent replica's share is due the grace (half a second) past its start.
    assert_eq!(next_due, at + ms(500) + look_ahead, "{own:?}");
    // The executor sleeps until that instant less its claim-ahead, then claims: the claim there
    // takes the silent replica's share. (Told the grace's end alone, it would claim at the start,
    // take nothing, be told the same instant again, and claim in a loop until the grace is over.)
    sleep_until(&h, next_due - look_ahead).await;
    let theirs = b_store.claim_due(&b, ahead, 100).await.unwrap();
    assert_eq!(
        own.claims.len() + theirs.claims.len(),
        8,
        "a claim at {next_due} less the claim-ahead took {theirs:?}"
    );
    assert!(
        theirs.claims.iter().all(|c| c.scheduled_at == at),
        "{theirs:?}"
    );
    let (own, theirs) = (verb_set(&own.claims), verb_set(&theirs.claims));
    assert_eq!(shared(&own, &theirs), 0, "{own:?} {theirs:?}");
}

pub async fn an_owner_at_its_cap_leaves_the_rest_of_its_share_to_the_others_past_the_grace(
    h: impl StoreUnderTest,
) {
    let spec = eight_jobs();
    let ((a_store, a), (b_store, b)) = two_live_replicas(&h, defaults(), &spec).await;
    let at = h.next_execution(MODULE, "job0").await.unwrap();
    sleep_until(&h, at + ms(100)).await;
    // The first replica has one slot left under its `max_concurrent_runs`: its claim takes one
    // occurrence of its share. The second takes its own share, and nothing more within the grace.
    let capped = a_store.claim_due(&a, Duration::ZERO, 1).await.unwrap();
    assert_eq!(capped.claims.len(), 1, "{capped:?}");
    let b_own = claim(&b_store, &b).await.claims;
    assert!((2..=6).contains(&b_own.len()), "{:?}", verb_set(&b_own));
    assert!(claim(&b_store, &b).await.claims.is_empty());
    // Past the grace, the rest of the capped replica's share is the second replica's to run.
    sleep_until(&h, at + past_the_grace()).await;
    let rest = claim(&b_store, &b).await.claims;
    let taken: BTreeSet<String> = verb_set(&capped.claims)
        .into_iter()
        .chain(verb_set(&b_own))
        .chain(verb_set(&rest))
        .collect();
    assert_eq!(
        capped.claims.len() + b_own.len() + rest.len(),
        8,
        "{:?} {:?} {:?}",
        verb_set(&capped.claims),
        verb_set(&b_own),
        verb_set(&rest)
    );
    assert_eq!(taken.len(), 8);
    assert!(
        rest.iter().all(|c| c.scheduled_at == at && !c.late),
        "{rest:?}"
    );
}

pub async fn a_draining_replica_gives_its_share_up_at_once(h: impl StoreUnderTest) {
    let spec = eight_jobs();
    let ((a_store, a), (b_store, b)) = two_live_replicas(&h, defaults(), &spec).await;
    let at = h.next_execution(MODULE, "job0").await.unwrap();

    // The second replica begins to shut down, its lease far from over: its row says so, and the
    // first counts it out at its next heartbeat. From then on the first owns every occurrence, and
    // claims them all ahead of their start, none of them the grace late.
    b_store.drain(&b).await.unwrap();
    a_store.heartbeat(&a).await.unwrap();
    sleep_until(&h, at - ms(400)).await;
    let all = claim_ahead(&a_store, &a).await.claims;
    assert_eq!(all.len(), 8, "{:?}", verb_set(&all));
    assert!(all.iter().all(|c| c.scheduled_at == at), "{all:?}");
}

/// Waits until `store` has heard nothing for a fifth of a second: what the case did before is heard.
async fn quiet<S: Store>(store: &S) {
    while tokio::time::timeout(Duration::from_millis(200), store.changed())
        .await
        .is_ok()
    {}
}

pub async fn the_others_hear_a_replica_drain_at_once(h: impl StoreUnderTest) {
    let spec = eight_jobs();
    let ((a_store, a), (b_store, b)) = two_live_replicas(&h, defaults(), &spec).await;
    let at = h.next_execution(MODULE, "job0").await.unwrap();
    // The first replica has heard what registering told it. Its claim ahead takes its share, by its
    // reading of the live replicas: both.
    quiet(&a_store).await;
    let own = claim_ahead(&a_store, &a).await.claims;
    assert!((2..=6).contains(&own.len()), "{:?}", verb_set(&own));
    // The second begins to shut down. The first hears it (a database store's wake-up; the in-memory
    // store shares its state) with no heartbeat, its reading far from a second old, and its next
    // claim takes the rest ahead of their start, not the grace after it.
    b_store.drain(&b).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_millis(500), a_store.changed()).await;
    let rest = claim_ahead(&a_store, &a).await.claims;
    assert!(h.now().await < at, "the case ran past the start");
    assert_eq!(
        own.len() + rest.len(),
        8,
        "{:?} {:?}",
        verb_set(&own),
        verb_set(&rest)
    );
    assert_eq!(shared(&verb_set(&own), &verb_set(&rest)), 0);
    assert!(rest.iter().all(|c| c.scheduled_at == at), "{rest:?}");
}

/// A job's expression due twice a minute: two seconds after `from`, and `gap` seconds later.
fn twice_a_minute(from: DateTime<Utc>, gap: u32) -> String {
    let first = u32::try_from(from.timestamp().rem_euclid(60)).unwrap() + 2;
    format!("{first},{} * * * * *", first + gap)
}

pub async fn an_occurrence_whose_owner_died_between_runs_is_taken_by_another_replica_once(
    h: impl StoreUnderTest,
) {
    // A job due twice a minute, four seconds apart: both occurrences within one minute have one
    // owner, which dies between them.
    let settled = settle_where(&h, |second| second % 60 < 50).await;
    let expression = twice_a_minute(settled, 4);
    let spec = deployment("billing@1", vec![job("rare", &expression)]);
    let (a_store, a) = replica_with(&h, short_lease(), &spec).await;
    let (b_store, b) = replica_with(&h, short_lease(), &spec).await;
    let first = h.next_execution(MODULE, "rare").await.unwrap();
    sleep_until(&h, first - ms(500)).await;
    a_store.heartbeat(&a).await.unwrap();
    b_store.heartbeat(&b).await.unwrap();
    sleep_until(&h, first + ms(100)).await;
    let a_took = claim(&a_store, &a).await.claims;
    let b_took = claim(&b_store, &b).await.claims;
    assert_eq!(a_took.len() + b_took.len(), 1, "{a_took:?} {b_took:?}");
    let ((owner_store, owner, ran), (other_store, other)) = if a_took.is_empty() {
        ((b_store, b, b_took), (a_store, a))
    } else {
        ((a_store, a, a_took), (b_store, b))
    };
    finish_chaining(&owner_store, &owner, &ran, None).await;
    // Its last sign of life; then it dies. Its lease (two seconds) ends before the next occurrence.
    owner_store.heartbeat(&owner).await.unwrap();
    let second = h.next_execution(MODULE, "rare").await.unwrap();
    assert_eq!(second, first + TimeDelta::seconds(4));
    sleep_until(&h, second - ms(800)).await;
    other_store.heartbeat(&other).await.unwrap();
    sleep_until(&h, second - ms(400)).await;
    let taken = claim_ahead(&other_store, &other).await.claims;
    assert_eq!(taken.len(), 1, "the dead owner's occurrence was not taken");
    assert_eq!((taken[0].scheduled_at, taken[0].late), (second, false));
    finish_chaining(&other_store, &other, &taken, None).await;
    let runs: Vec<DateTime<Utc>> = h.runs().await.iter().map(|r| r.scheduled_at).collect();
    assert_eq!(runs, vec![first, second], "each occurrence ran once");
}

pub async fn the_one_job_of_a_module_moves_to_the_next_replica_each_minute_and_never_runs_twice(
    h: impl StoreUnderTest,
) {
    let spec = deployment("billing@1", vec![job("only", SECONDLY)]);
    // Three seconds before a minute starts: every job changes hands then.
    settle_where(&h, |second| second % 60 == 57).await;
    let (a_store, a) = replica(&h, &spec).await;
    let (b_store, b) = replica(&h, &spec).await;
    a_store.heartbeat(&a).await.unwrap();
    let replicas = [(&a_store, &a), (&b_store, &b)];
    // What each replica's last finish chained, if anything.
    let mut chained: [Vec<Claim>; 2] = [Vec::new(), Vec::new()];
    // Which replica ran each occurrence.
    let mut ran_by = Vec::new();
    let start = h.next_execution(MODULE, "only").await.unwrap();
    for at in (0..6).map(|s| start + TimeDelta::seconds(s)) {
        sleep_until(&h, at - ms(400)).await;
        let mut held: Vec<Vec<Claim>> = Vec::new();
        for (i, (store, runner)) in replicas.iter().enumerate() {
            let mut claims = std::mem::take(&mut chained[i]);
            claims.extend(claim_ahead(*store, runner).await.claims);
            held.push(claims);
        }
        let holders: Vec<usize> = (0..2).filter(|i| !held[*i].is_empty()).collect();
        let [holder] = holders[..] else {
            panic!("the occurrence at {at} was held by {held:?}")
        };
        assert_eq!(held[holder].len(), 1, "{held:?}");
        assert_eq!(
            (held[holder][0].scheduled_at, held[holder][0].late),
            (at, false)
        );
        ran_by.push(holder);
        sleep_until(&h, at + ms(100)).await;
        let (store, runner) = replicas[holder];
        chained[holder] =
            finish_chaining(store, runner, &held[holder], Some(Duration::from_secs(1))).await;
    }
    // Occurrences :58 and :59, then :00 to :03: the job moved to the other replica as the minute
    // started, and stayed there.
    let (before, after) = (ran_by[0], 1 - ran_by[0]);
    assert_eq!(
        ran_by,
        [before, before, after, after, after, after],
        "{ran_by:?}"
    );
    // One run of each occurrence (and the next one's, where the last finish chained it).
    let runs: Vec<DateTime<Utc>> = h.runs().await.iter().map(|r| r.scheduled_at).collect();
    assert!(runs.windows(2).all(|w| w[0] < w[1]), "{runs:?}");
    let ran: Vec<DateTime<Utc>> = (0..6).map(|s| start + TimeDelta::seconds(s)).collect();
    assert_eq!(runs[..runs.len().min(6)], ran[..], "{runs:?}");
}
