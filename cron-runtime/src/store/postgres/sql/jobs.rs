//! `cron_jobs`: one verb of one deployment with its schedule state. Registration, the claim's reads,
//! takeover, leases, and the job side of ending runs.

/// Which rows a claim may take: the one definition (`store/sql/claimable.rs`) in PostgreSQL's
/// spelling, the refused ids as the array `$2`.
///
/// The executing verbs of the module's other deployments (the runner's own has one row per verb, the
/// candidate) are read once into a hashed `NOT IN`: a correlated `NOT EXISTS` is planned as a scan of
/// every executing row per candidate, because the partial index looks empty to the planner.
macro_rules! claimable_rows {
    () => {
        crate::store::sql::claimable_rows!(
            deployment: "$1",
            not_refused: "j.id <> ALL($2::bigint[])",
            not_every_replica: "NOT j.every_replica",
        )
    };
}

/// A claimable row has a regular occurrence to run: it is not paused and its schedule has one left. The
/// predicate of the index `cron_jobs_due`, which holds them in the order the claim takes them.
macro_rules! regular_occurrence {
    () => {
        "
      AND NOT j.paused
      AND j.next_execution IS NOT NULL"
    };
}

/// When a claimable row's regular occurrence is due to start (`rules::jittered`; docs/runtime.md,
/// "Jitter"): its `next_execution` plus the job's jitter offset, or, for a row holding a retry, the
/// retry's instant. The claim keeps `next_execution <= horizon` beside it, so that it still reads the
/// index `cron_jobs_due` in order; for a job without jitter this is `next_execution`.
macro_rules! due_start {
    () => {
        "(j.next_execution + CASE WHEN j.retry_run_id IS NULL THEN j.jitter_offset_ms ELSE 0 END
          * interval '1 millisecond')"
    };
}

/// Whether this replica owns a claimable row's regular occurrence (`store::sql::owned_occurrence!`;
/// docs/runtime.md, "How work is spread"), the replicas, the rank and the rotation in seconds being
/// parameters `$r`, `$k` and `$t` of the statement: a macro per statement, by their numbers.
macro_rules! owned {
    ($replicas:literal, $rank:literal, $rotation:literal) => {
        crate::store::sql::owned_occurrence!(
            seconds: "floor(extract(epoch FROM j.next_execution))::bigint",
            replicas: $replicas,
            rank: $rank,
            rotation: $rotation,
        )
    };
}

/// A claimable row has a pending trigger (`cronverb trigger`), paused or not. The predicate of the index
/// `cron_jobs_triggered`.
macro_rules! pending_trigger {
    () => {
        "
      AND j.trigger_requested_at IS NOT NULL"
    };
}

/// A claimable row with a queued backfill occurrence (docs/operations.md, "Backfill"): its verb has
/// one queued and it is not paused. The claim takes the earliest when, besides, no trigger is pending
/// on the row and no regular occurrence (or retry) of it is due by its horizon
/// (`rules::takes_backfill`). Reads the module's part of the queue by its primary key (module, verb,
/// occurrence): nothing unless an operator backfills, and while a backfill of N occurrences is queued,
/// N index entries per claim (docs/operations.md, "Backfill").
macro_rules! queued_backfill {
    () => {
        "
      AND NOT j.paused
      AND (j.module_name, j.verb) IN (
          SELECT b.module_name, b.verb FROM cron_backfills b
          WHERE b.module_name = (SELECT module FROM cron_deployments WHERE id = $1))"
    };
}

/// The columns of a locked job row and of the run that holds it (`rules::Held`), from `cron_jobs j` and
/// `cron_job_runs r`: every path that ends runs reads its rows through it. `manual` is false for a row
/// whose run is not recorded. `backfill_queued`: the verb has a queued backfill occurrence due
/// (docs/operations.md, "Backfill"), its earliest one read by the first entry of `cron_backfills`'
/// primary key, one probe per row. Written as `min`, not `EXISTS`: the planner takes an `EXISTS` for a
/// search that stops at the first match and scans the whole queue per row when one verb fills it.
/// Whether the deployment is active is read after the lock ([`ACTIVE`](super::deployments::ACTIVE)).
macro_rules! held_rows {
    () => {
        "SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, j.next_execution,
       j.paused, j.trigger_requested_at IS NOT NULL AS triggered, j.current_run_id,
       r.id IS NOT NULL AS recorded, r.scheduled_at,
       coalesce(r.manual, false) AS manual,
       coalesce(r.backfill, false) AS backfill, j.retry_run_id, coalesce(r.attempts IS NOT NULL, false) AS retried,
       coalesce(jsonb_array_length(r.attempts), 0) AS earlier_attempts, j.retries,
       (extract(epoch FROM j.backoff) * 1000)::bigint AS backoff_ms, j.catch_up_all, j.jitter_offset_ms,
       coalesce((SELECT min(b.scheduled_at) FROM cron_backfills b
                 WHERE b.module_name = j.module_name AND b.verb = j.verb) <= now(), false)
           AS backfill_queued,
       r.cancel_requested_by, r.cancel_note,
       now() AS now
FROM cron_jobs j
LEFT JOIN cron_job_runs r ON r.id = j.current_run_id"
    };
}

statements! { "jobs";
    /// The job rows of deployment `$1` of module `$2`, one per element of the arrays `$3`..`$14`
    /// (verb, expression, zone, timeout in seconds, missed-run policy, first occurrence, whether every
    /// replica runs it; the job's own lease in milliseconds, its retries and backoff in milliseconds,
    /// its catch-up window in milliseconds, NULL for none; whether it catches up every missed
    /// occurrence, `missed = "all"`, written `once` in `missed`; its jitter in milliseconds, NULL for
    /// none, and its jitter's offset in milliseconds, migration 0008). A row that exists is left as it
    /// is.
    INSERT_JOBS = "
INSERT INTO cron_jobs
    (deployment_id, module_name, verb, schedule, timezone, timeout, missed, next_execution,
     every_replica, lease, retries, backoff, catch_up, catch_up_all, jitter, jitter_offset_ms,
     code_schedule, code_timezone, fixed)
SELECT $1, $2, u.verb, u.schedule, u.timezone, make_interval(secs => u.timeout), u.missed,
       u.next_execution, u.every_replica, make_interval(secs => u.lease / 1000.0), u.retries,
       make_interval(secs => u.backoff / 1000.0), make_interval(secs => u.catch_up / 1000.0),
       u.catch_up_all, make_interval(secs => u.jitter / 1000.0), u.jitter_offset_ms,
       u.code_schedule, u.code_timezone, u.fixed
FROM unnest($3::text[], $4::text[], $5::text[], $6::float8[], $7::text[], $8::timestamptz[],
            $9::boolean[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::boolean[],
            $15::bigint[], $16::bigint[], $17::text[], $18::text[], $19::boolean[])
    AS u(verb, schedule, timezone, timeout, missed, next_execution, every_replica, lease, retries,
         backoff, catch_up, catch_up_all, jitter, jitter_offset_ms, code_schedule, code_timezone,
         fixed)
ON CONFLICT (deployment_id, verb) DO NOTHING
";

    /// The schedule overrides of module `$1` (docs/operations.md, "Changing a schedule without a
    /// build"), as `(verb, schedule, timezone)`: a registration starts a new row of an overridden verb
    /// at its override.
    OVERRIDES = "
SELECT verb, schedule, timezone FROM cron_overrides WHERE module_name = $1
";

    /// Deletes the schedule override of verb `$2` of module `$1`: `cronverb reschedule --reset`, and a
    /// registration whose code marks the verb `fixed` (docs/operations.md, "Changing a schedule
    /// without a build").
    DROP_OVERRIDE = "
DELETE FROM cron_overrides WHERE module_name = $1 AND verb = $2
";

    /// Takeover by code without verb `$2` of module `$1`: the verb's rows that run an override (a copy
    /// of their code's schedule kept), in every deployment, each going back to its code's schedule
    /// (docs/operations.md, "Changing a schedule without a build"). Not locked here: the takeover
    /// locked them with the rest of the rows it writes, in one order (`TAKEOVER_ROWS`). The module's
    /// deployments are found by their index, and each one's row of the verb by its unique key.
    OVERRIDDEN_ROWS = "
SELECT j.id, j.schedule, j.timezone, j.code_schedule, j.code_timezone, j.fixed, j.state,
       j.next_execution, j.retry_run_id IS NOT NULL AS retry_pending
FROM cron_deployments d
JOIN cron_jobs j ON j.deployment_id = d.id AND j.verb = $2
WHERE d.module = $1 AND j.code_schedule IS NOT NULL
ORDER BY j.id
";

    /// Row `$1` runs expression `$2` in zone `$3` (the code's being `$4` in `$5` where that is an
    /// override, NULL otherwise), next at `$6`, its schedule counting since `$7`: `cronverb
    /// reschedule`, its `--reset`, and the takeover that drops an outlived override.
    RESCHEDULE_ROW = "
UPDATE cron_jobs SET schedule = $2, timezone = $3, code_schedule = $4, code_timezone = $5,
    next_execution = $6, start_time = $7
WHERE id = $1
";

    /// The rows of deployment `$1` as a replica checks them (registration, heartbeats): their schedule
    /// text, and when they are next due or their lease ends. `queued_at`: the earliest queued backfill
    /// occurrence of the row's verb at or before now (docs/operations.md, "Backfill"), the module's
    /// part of the queue read once by its primary key and joined by verb: nothing unless an operator
    /// backfills.
    DEPLOYMENT_ROWS = "
SELECT j.id, j.verb, j.schedule, j.timezone, j.state, j.paused, j.next_execution,
       j.trigger_requested_at, j.lease_expires_at, j.every_replica, b.queued_at, j.code_schedule
FROM cron_jobs j
LEFT JOIN (
    SELECT verb, min(scheduled_at) AS queued_at FROM cron_backfills
    WHERE module_name = (SELECT module FROM cron_deployments WHERE id = $1) AND scheduled_at <= now()
    GROUP BY verb
) b ON b.verb = j.verb
WHERE j.deployment_id = $1 ORDER BY j.id
";

    /// The claim's first statement: the due rows runner deployment `$1` may take (less the refused ids
    /// `$2`), locked. It picks the claimable rows (`claimable_rows!`) due by the database's clock plus `$3`
    /// seconds, in the order of their occurrence, at most `$4`, and locks them without waiting for rows
    /// another replica is claiming, with the facts the claim's rules decide on (`rules::DueRow`: whether
    /// an occurrence is late, skipped, a retry or cut short). Nothing is written: the store checks each
    /// row's schedule text against the rows it checked, and [`CLAIM_RUNS`](super::runs::CLAIM_RUNS)
    /// records runs for the rows that pass, in the same transaction.
    ///
    /// A row with a pending trigger is due too, paused or not: unless a regular occurrence is due at the
    /// same time (which then runs and satisfies the trigger), its run is *manual*: scheduled at the
    /// trigger's instant, never late, and it leaves `next_execution` alone. Regular occurrences and
    /// triggers are read apart, each from its own index in the order the claim takes them, so a claim
    /// reads the rows it takes, not every due row of the deployment (docs/benchmarks.md). A trigger row
    /// locked but left out by the final limit stays idle.
    ///
    /// A row with a queued backfill occurrence (`queued_backfill!`) is due too when it is not paused,
    /// no trigger is pending on it and no regular occurrence of it is due: its run is manual, scheduled
    /// at its verb's earliest queued occurrence and recorded as a backfill (`rules::backfill`; the claim
    /// deletes it from the queue, `store::sql::backfill::DROP_QUEUED`). Only an occurrence at or
    /// before now is taken (a backfill's window ends by now, but a queued occurrence to come would hold
    /// the row until its instant), and backfill rows come after every regular, retry and trigger row:
    /// under the replica's cap, old queued occurrences never take a slot a regular run is due for
    /// (docs/operations.md, "Backfill").
    ///
    /// A regular occurrence is taken only by the replica that owns it, the `$6`th of `$5` live
    /// replicas (rotation `$7` seconds), or by any once it is `$8` seconds past its start
    /// (`store::sql::spread_takes!`; docs/runtime.md, "How work is spread").
    ///
    /// `FOR SHARE OF d` makes a claim and a takeover (which updates the deployment row) exclusive: a
    /// claim either commits before the takeover reads the old deployment's rows or sees the deployment
    /// inactive.
    CLAIM_DUE = concat!("
WITH regular AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule, j.next_execution AS scheduled_at, false AS manual,
           false AS backfill, j.missed, (extract(epoch FROM j.catch_up) * 1000)::bigint AS catch_up_ms,
           j.catch_up_all, j.retry_run_id,
           CASE WHEN j.retry_run_id IS NOT NULL
               THEN (SELECT r.scheduled_at FROM cron_job_runs r WHERE r.id = j.retry_run_id) END AS retry_of,
           j.jitter_offset_ms, now() AS now
    ", claimable_rows!(), regular_occurrence!(), "
      AND j.next_execution <= now() + make_interval(secs => $3)
      AND ", due_start!(), " <= now() + make_interval(secs => $3)", crate::store::sql::spread_takes!(
        owned: [owned!("$5", "$6", "$7")],
        start: [due_start!()],
        grace_ago: "now() - make_interval(secs => $8)",
    ), "
    ORDER BY j.next_execution, j.id
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
),
manual AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule, j.trigger_requested_at AS scheduled_at, true AS manual,
           false AS backfill, j.missed, NULL::bigint AS catch_up_ms, j.catch_up_all,
           NULL::bigint AS retry_run_id, NULL::timestamptz AS retry_of, 0::bigint AS jitter_offset_ms,
           now() AS now
    ", claimable_rows!(), pending_trigger!(), "
      AND NOT coalesce(NOT j.paused AND ", due_start!(), " <= now() + make_interval(secs => $3), false)
    ORDER BY j.trigger_requested_at, j.id
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
),
backfill AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule,
           (SELECT min(b.scheduled_at) FROM cron_backfills b
            WHERE b.module_name = j.module_name AND b.verb = j.verb) AS scheduled_at,
           true AS manual, true AS backfill, j.missed, NULL::bigint AS catch_up_ms, j.catch_up_all,
           NULL::bigint AS retry_run_id, NULL::timestamptz AS retry_of, 0::bigint AS jitter_offset_ms,
           now() AS now
    ", claimable_rows!(), queued_backfill!(), "
      AND j.trigger_requested_at IS NULL
      AND NOT coalesce(", due_start!(), " <= now() + make_interval(secs => $3), false)
      AND (SELECT min(b.scheduled_at) FROM cron_backfills b
           WHERE b.module_name = j.module_name AND b.verb = j.verb) <= now()
    ORDER BY j.id
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
    FOR SHARE OF d
)
SELECT * FROM regular
UNION ALL
SELECT * FROM manual
UNION ALL
SELECT * FROM backfill
ORDER BY backfill, scheduled_at, id
LIMIT $4
");

    /// The earliest start of a regular occurrence (its jittered start, `due_start!`; docs/runtime.md,
    /// "Jitter"), pending trigger or queued backfill occurrence (which is due at once) among the rows
    /// deployment `$1`'s claim could take next (less the refused ids `$2`), and the database's clock as
    /// it answers (not `now()`, which stands still at the transaction's start). Each part reads the
    /// first row of its index that passes. A regular row starts no earlier than its `next_execution`,
    /// so the earliest start is the first row's, or that of a row whose `next_execution` is before it:
    /// for jobs without jitter an empty range of the index `cron_jobs_due`. A regular occurrence that
    /// this replica, the `$4`th of `$3` (rotation `$5` seconds), does not own is due to it `$6`
    /// seconds after its start, the grace and the claim's look ahead (`rules::Spread::due_at`;
    /// docs/runtime.md, "How work is spread"): the earliest start of an owned
    /// row (`own`, read the same way) and the earliest start of any row plus that grace.
    NEXT_DUE = concat!("
WITH first AS (
    SELECT ", due_start!(), " AS start
    ", claimable_rows!(), regular_occurrence!(), "
    ORDER BY j.next_execution, j.id
    LIMIT 1
),
own AS (
    SELECT ", due_start!(), " AS start
    ", claimable_rows!(), regular_occurrence!(), "
      AND ", owned!("$3", "$4", "$5"), "
    ORDER BY j.next_execution, j.id
    LIMIT 1
)
SELECT clock_timestamp() AS clock, least(
    (SELECT start FROM own),
    (SELECT min(", due_start!(), ")
    ", claimable_rows!(), regular_occurrence!(), "
      AND ", owned!("$3", "$4", "$5"), "
      AND j.next_execution < (SELECT start FROM own)),
    (SELECT start FROM first) + make_interval(secs => $6),
    (SELECT min(", due_start!(), ")
    ", claimable_rows!(), regular_occurrence!(), "
      AND j.next_execution < (SELECT start FROM first)) + make_interval(secs => $6),
    (SELECT j.trigger_requested_at
    ", claimable_rows!(), pending_trigger!(), "
    ORDER BY j.trigger_requested_at, j.id
    LIMIT 1),
    (SELECT (SELECT min(b.scheduled_at) FROM cron_backfills b
             WHERE b.module_name = j.module_name AND b.verb = j.verb) AS first
    ", claimable_rows!(), queued_backfill!(), "
    ORDER BY first
    LIMIT 1)
) AS next_due
");

    /// Drops the trigger of row `$1` pending at `$2`, whose instant is exactly one of a run already
    /// recorded.
    DROP_TRIGGER = "
UPDATE cron_jobs SET trigger_requested_at = NULL
WHERE id = $1 AND trigger_requested_at = $2
";

    /// Moves idle row `$1` from its occurrence `$3`, which already has a run, to `$2`.
    MOVE_PAST_RAN = "
UPDATE cron_jobs SET next_execution = $2
WHERE id = $1 AND state = 'idle' AND next_execution = $3
";

    /// Takeover: the verbs of deployment `$1`, read before any row is locked to find the overrides its
    /// code outlives; a deployment's verbs are fixed at its registration.
    OWN_VERBS = "SELECT verb FROM cron_jobs WHERE deployment_id = $1";

    /// Takeover: every row it writes, locked together before the takeover reads them: those of module
    /// `$1`'s active deployment and of deployment `$2` taking it over, and the rows of the verbs `$3`
    /// (overrides the takeover drops: each of their rows goes back to its code's schedule) in every
    /// deployment of the module. In the one order of every path that locks several deployments' rows:
    /// the inactive deployments' rows first, by id, then the active one's, as an operator's pause,
    /// resume, reschedule and cancel lock a verb's rows of every deployment
    /// (`admin::lock_for_resume`), and as a finish, recovery or give-back of a replaced deployment's
    /// run locks its own row, then the active one's to carry to (`CARRIED_ROWS`). After a rollback the
    /// active deployment has the lower ids: an order by id alone would wait in a cycle with such a
    /// finish; and a row of an older deployment locked after the active one's would too.
    /// Each part is found by its index: the two deployments' rows by deployment, the verbs' rows by
    /// their unique key in each deployment of the module (an `OR` over both would read every row of
    /// every deployment of the module).
    TAKEOVER_ROWS = "
SELECT j.id FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id
WHERE j.id IN (
    SELECT t.id FROM cron_deployments m JOIN cron_jobs t ON t.deployment_id = m.id
    WHERE m.module = $1 AND (m.active OR m.id = $2)
    UNION ALL
    SELECT t.id FROM cron_deployments m
    JOIN cron_jobs t ON t.deployment_id = m.id AND t.verb = ANY($3::text[])
    WHERE m.module = $1
)
ORDER BY d.active, j.id
FOR UPDATE OF j
";

    /// Takeover: the rows of module `$1`'s active deployment, locked first (a claim in flight on them
    /// commits before they are read, and later claims see the deployment inactive: they share-lock its
    /// row), in the order of their ids, as finishes and renewals lock them, so that none waits on another
    /// in a cycle. As `rules::GivenUp` reads them: the instant of a regular run in flight (a manual run
    /// took none; a retry's row is at the retry's instant), and the retry an idle row holds.
    PREVIOUS_ROWS = crate::store::sql::previous_rows!(module: "$1", lock: "FOR UPDATE OF j");

    /// Takeover: the rows of the deployment `$1` taking the module over, locked in the order of their ids.
    OWN_ROWS = "
SELECT id, verb, schedule, timezone, state, every_replica FROM cron_jobs
WHERE deployment_id = $1 ORDER BY id FOR UPDATE
";

    /// Takeover: where each idle row of `$1` starts, since when its schedule counts, its retry and
    /// the occurrence it last reported overdue (`$2` to `$5`).
    START_ROWS = "
UPDATE cron_jobs j SET next_execution = u.next_execution, start_time = u.start_time,
    retry_run_id = u.retry_run_id, overdue_notified_for = u.overdue_notified_for
FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::timestamptz[])
    AS u(id, next_execution, start_time, retry_run_id, overdue_notified_for)
WHERE j.id = u.id AND j.state = 'idle'
";

    /// Takeover: the pending retries of the previous deployment `$1` went to the new rows (or ended):
    /// its rows no longer hold them.
    DROP_PREVIOUS_RETRIES = "
UPDATE cron_jobs SET retry_run_id = NULL
WHERE deployment_id = $1 AND state = 'idle' AND retry_run_id IS NOT NULL
";

    /// A claim found the retry of run `$2` of idle row `$1` cut short (the next occurrence came, docs/
    /// runtime.md, "Retries"): the run ends `failed` with error `$3`, started with its first attempt,
    /// and the row goes on at `$4`.
    CUT_SHORT = "
WITH ended AS (
    UPDATE cron_job_runs r
    SET outcome = 'failed', error = $3, finished_at = now(),
        started_at = coalesce((r.attempts->0->>'started_at')::timestamptz, r.started_at)
    WHERE r.id = $2 AND r.outcome = 'running'
    RETURNING r.id
)
UPDATE cron_jobs SET next_execution = $4, retry_run_id = NULL
WHERE id = $1 AND state = 'idle' AND retry_run_id = $2
";

    /// At a takeover, carries each verb's pause (with its note) and pending trigger from the previous
    /// deployment's row ($2) to the new one's ($1), and clears the triggers left on the previous rows.
    /// Only the rows with something to carry are written: a takeover of 100,000 verbs with no pause
    /// rewrites none (docs/benchmarks.md, "Register"). A row that is not paused has no note and no
    /// `paused_at` (`resume` clears them), so leaving the others alone changes nothing.
    CARRY_OPERATOR_STATE = "
WITH carried AS (
    UPDATE cron_jobs n
    SET paused = n.paused OR o.paused,
        pause_note = CASE WHEN n.paused THEN n.pause_note ELSE o.pause_note END,
        paused_at = CASE WHEN n.paused THEN n.paused_at ELSE o.paused_at END,
        trigger_requested_at = coalesce(n.trigger_requested_at, o.trigger_requested_at)
    FROM cron_jobs o
    WHERE n.deployment_id = $1 AND o.deployment_id = $2 AND o.verb = n.verb
      AND (o.paused OR o.trigger_requested_at IS NOT NULL)
    RETURNING n.id
)
UPDATE cron_jobs SET trigger_requested_at = NULL
WHERE deployment_id = $2 AND trigger_requested_at IS NOT NULL
";

    /// The rows that the runs `$2` of jobs `$3` (one pair per element) still hold for runner `$1`,
    /// locked in the order of their ids, so that two transactions locking several rows never wait on
    /// each other in a cycle. A finish reads them. Each run's row is locked with its job's (`r.runner_id =
    /// $1` makes the join an inner one): an operator's request to cancel it (`admin::request_cancel`)
    /// either committed before, and the finish reads it, or waits for the finish and finds the run
    /// ended (docs/operations.md, "Cancelling a run").
    HELD_BY_RUNS = concat!(held_rows!(), "
WHERE (j.current_run_id, j.id) IN (SELECT * FROM unnest($2::bigint[], $3::bigint[]))
  AND j.state = 'executing'
  AND r.runner_id = $1
ORDER BY j.id
FOR UPDATE OF j, r
");

    /// The rows that the runs `$1` still hold for runner `$2`, locked in the order of their ids. A give
    /// back reads them. Each run's row is locked with its job's, as [`HELD_BY_RUNS`] locks them: a
    /// request to cancel the run that committed while the give-back waited for the lock is read as it
    /// is now, so that the run ends `cancelled` by its requester, never put back to run again
    /// (`rules::HeldRun::let_go`; docs/operations.md, "Cancelling a run").
    HELD_BY_RUN_IDS = concat!(held_rows!(), "
WHERE j.current_run_id = ANY($1)
  AND j.state = 'executing'
  AND r.runner_id = $2
ORDER BY j.id
FOR UPDATE OF j, r
");

    /// The executing rows of deployment `$1`, locked in the order of their ids (shutdown). On `cron_jobs`
    /// alone: a lock that waited on a finish then sees the row as that finish left it.
    LOCK_EXECUTING = "
SELECT j.id FROM cron_jobs j
WHERE j.deployment_id = $1 AND j.state = 'executing'
ORDER BY j.id
FOR UPDATE
";

    /// Every row that runner `$1`'s runs still hold in deployment `$2` (shutdown, after
    /// [`LOCK_EXECUTING`]).
    HELD_BY_RUNNER = concat!(held_rows!(), "
WHERE j.deployment_id = $2
  AND j.state = 'executing'
  AND r.runner_id = $1
ORDER BY j.id
");

    /// Executing rows whose lease expired, oldest first, at most `$2`, skipping rows another replica is
    /// recovering and the bad rows `$1` already seen in this pass. Each run's row is locked with its
    /// job's, as [`HELD_BY_RUNS`] locks them (`r.id IS NOT NULL` makes the join an inner one; an
    /// executing row whose run has no record is [`EXPIRED_UNRECORDED`]'s): a request to cancel the
    /// run that committed after this statement's snapshot is read as it is now, and one still being
    /// written passes the row by, for the next heartbeat, so that the run ends `cancelled` by its requester, never `abandoned` and
    /// retried over the request (docs/operations.md, "Cancelling a run").
    EXPIRED = concat!(held_rows!(), "
WHERE j.state = 'executing'
  AND j.lease_expires_at < now()
  AND j.id <> ALL($1::bigint[])
  AND r.id IS NOT NULL
ORDER BY j.lease_expires_at
LIMIT $2
FOR UPDATE OF j, r SKIP LOCKED
");

    /// Executing rows whose lease expired and whose run has no record (a release's row from before
    /// the run records, history deleted by hand), as [`EXPIRED`] reads the others (which its inner
    /// join leaves out), at most `$2`, less the bad rows `$1`: the job row alone is locked, there being
    /// no run row to lock nor request to read, skipping rows another replica is recovering. Such a row
    /// is taken back as any other (G4, docs/operations.md), as SQLite's one statement takes it.
    EXPIRED_UNRECORDED = concat!(held_rows!(), "
WHERE j.state = 'executing'
  AND j.lease_expires_at < now()
  AND j.id <> ALL($1::bigint[])
  AND NOT EXISTS (SELECT 1 FROM cron_job_runs u WHERE u.id = j.current_run_id)
ORDER BY j.lease_expires_at
LIMIT $2
FOR UPDATE OF j SKIP LOCKED
");

    /// Extends by the job's own lease, or `$3` seconds for a job that sets none, the leases of the runs
    /// `$1` that runner `$2` holds; returns their ids. The
    /// rows are locked in the order of their ids, as a batch of finishes locks them, so that the two never
    /// wait on each other in a cycle.
    RENEW = "
WITH held AS (
    SELECT j.id, r.id AS run_id
    FROM cron_job_runs r
    JOIN cron_jobs j ON j.id = r.job_id AND j.current_run_id = r.id
    WHERE r.id = ANY($1)
      AND r.runner_id = $2
      AND j.state = 'executing'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE cron_jobs j
SET lease_expires_at = greatest(j.lease_expires_at, now() + coalesce(j.lease, make_interval(secs => $3)))
FROM held
WHERE j.id = held.id
RETURNING held.run_id
";

    /// The job side of ending runs, one element of each array per run (`write_ends`): each job is idle
    /// with its next occurrence, or executing the run [`CHAIN_RUNS`](super::runs::CHAIN_RUNS) recorded
    /// for that occurrence, with that run's lease. A run given back leaves its trigger pending again
    /// (`$5`; NULL for the others, which keep the row's own). `$6` is the run whose retry the row now
    /// holds (docs/runtime.md, "Retries"): the ended run's, or the one a manual run found pending
    /// (`rules::Ending::retry_run`); NULL when none is pending.
    END_JOBS = "
UPDATE cron_jobs j
SET state = CASE WHEN e.run_id IS NULL THEN 'idle' ELSE 'executing' END,
    next_execution = e.next_execution,
    current_run_id = e.run_id,
    lease_expires_at = e.lease_expires_at,
    trigger_requested_at = coalesce(j.trigger_requested_at, e.trigger_requested_at),
    retry_run_id = e.retry_run_id
FROM unnest($1::bigint[], $2::timestamptz[], $3::bigint[], $4::timestamptz[], $5::timestamptz[],
            $6::bigint[])
    AS e(id, next_execution, run_id, lease_expires_at, trigger_requested_at, retry_run_id)
WHERE j.id = e.id
";

    /// Overdue: the schedule each row of deployment `$1` that a claim takes runs now (its code's or an
    /// operator's override), which the check expects occurrences of.
    RUNNING_SCHEDULES = "
SELECT id, verb, schedule, timezone FROM cron_jobs WHERE deployment_id = $1 AND NOT every_replica
";

    /// Overdue: the facts of the rows of deployment `$1` for the expected occurrences, one element of
    /// each array of `$2`..`$4` per job (verb, occurrence, deadline); one statement per check. The job
    /// rows are locked in the order of their ids, as the takeover's `PREVIOUS_ROWS` locks them, and
    /// their deployment's row shared after them (a claim's `FOR SHARE OF d`): a pause, a takeover or
    /// another replica's record that holds them is waited for, and its commit read.
    OVERDUE_ROWS = crate::store::sql::overdue_rows!(
        deployment: "$1",
        expected: "unnest($2::text[], $3::timestamptz[], $4::timestamptz[]) AS e(verb, occurrence, deadline)",
        lock: "ORDER BY j.id
FOR UPDATE OF j
FOR SHARE OF d",
    );

    /// Overdue: records the rows `$1`, which the check's transaction locked, as having reported their
    /// occurrence of `$2`.
    MARK_OVERDUE = crate::store::sql::mark_overdue!(
        rows: "unnest($1::bigint[], $2::timestamptz[]) AS w(id, occurrence)",
    );
}
