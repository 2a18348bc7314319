//! The statements of the SQL stores' steps (`store/sql`, [`Steps`]) on SQLite, one per PostgreSQL
//! statement, batch-shaped: a batch binds as one JSON array of rows ([`Rows`](crate::store::sql::values::Rows))
//! that one `json_each` reads, each row's values as `value ->> n`, in the order of the columns, so that
//! a statement costs O(n) in its batch (nothing is joined on a `json_each`'s index, which SQLite cannot
//! search); ids alone bind as a JSON array ([`Column`](crate::store::sql::values::Column)), read as
//! `IN (SELECT value FROM json_each(?))`. Every statement searches its tables by an index (the
//! `every_batch_statement_searches_by_index` test reads their plans).
//!
//! What SQLite lacks and each text does instead (docs/runtime.md, "The store seam"):
//! - row locks (`FOR UPDATE`, `SKIP LOCKED`) and the takeover's advisory lock: a step's transaction
//!   begins with `BEGIN IMMEDIATE`, so it holds the file, and nothing else writes until it commits;
//! - `now()`: the host's clock (the store's, `super::now`), read once the transaction holds the file, or
//!   as a statement outside one (a heartbeat, a renewal) gets its connection, and written to the
//!   temporary table `cron_clock` ([`SET_CLOCK`]), which every statement reads as
//!   `(SELECT now FROM temp.cron_clock)`; the clock "as it answers" is that too, and the executor's
//!   anchor reads the host's clock itself (`Protocol::anchor`). A run claimed now for an instant is planned to start at
//!   `max(now, instant)` (`rules::start_of`) and leased until that plus the lease (`rules::lease_expires`);
//! - data-modifying `WITH`: a text that writes two tables is two statements, run in order on the same
//!   parameters (SQLite's driver binds `?N` by its number in each), the last one giving the rows;
//! - `jsonb`: the attempts of a run are the JSON text that `serde_json` writes, instants in RFC 3339,
//!   which `micros_of_text!` reads and `attempt_instant!` writes, to the microsecond.

use crate::store::sql::Steps;

/// An instant in RFC 3339 (`$text`, as `serde_json` writes a `DateTime<Utc>`: UTC, `Z`, a fraction of
/// 0, 3, 6 or 9 digits) as microseconds.
macro_rules! micros_of_text {
    ($text:literal) => {
        concat!(
            "unixepoch(substr(",
            $text,
            ", 1, 19)) * 1000000 + CASE WHEN substr(",
            $text,
            ", 20, 1) = '.' THEN CAST(substr(rtrim(substr(",
            $text,
            ", 21), 'Z') || '000000', 1, 6) AS INTEGER) ELSE 0 END"
        )
    };
}

/// An instant in microseconds (`$micros`) as RFC 3339, to the microsecond, as `serde_json` reads it.
macro_rules! attempt_instant {
    ($micros:expr) => {
        concat!(
            "CASE WHEN ",
            $micros,
            " IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%S', ",
            $micros,
            " / 1000000, 'unixepoch') || printf('.%06dZ', ",
            $micros,
            " % 1000000) END"
        )
    };
}

/// A claimable row has a regular occurrence to run: PostgreSQL's `regular_occurrence!`
/// (`postgres/sql/jobs.rs`) in SQLite's spelling, the predicate of the index `cron_jobs_due`.
macro_rules! regular_occurrence {
    () => {
        "
      AND j.paused = 0
      AND j.next_execution IS NOT NULL"
    };
}

/// A claimable row with a queued backfill occurrence: PostgreSQL's
/// `queued_backfill!` (`postgres/sql/jobs.rs`) in SQLite's spelling.
macro_rules! queued_backfill {
    () => {
        "
      AND j.paused = 0
      AND (j.module_name, j.verb) IN (
          SELECT b.module_name, b.verb FROM cron_backfills b
          WHERE b.module_name = (SELECT module FROM cron_deployments WHERE id = ?1))"
    };
}

/// When a claimable row's regular occurrence is due to start: PostgreSQL's `due_start!`
/// (`postgres/sql/jobs.rs`) in SQLite's spelling, instants and spans in microseconds.
macro_rules! due_start {
    () => {
        "(j.next_execution + CASE WHEN j.retry_run_id IS NULL THEN j.jitter_offset_ms ELSE 0 END * 1000)"
    };
}

/// Whether this replica owns a claimable row's regular occurrence: PostgreSQL's `owned!`
/// (`postgres/sql/jobs.rs`) in SQLite's spelling, the row's instant in whole seconds from its
/// microseconds.
macro_rules! owned {
    ($replicas:literal, $rank:literal, $rotation:literal) => {
        crate::store::sql::owned_occurrence!(
            seconds: "(j.next_execution / 1000000)",
            replicas: $replicas,
            rank: $rank,
            rotation: $rotation,
        )
    };
}

/// Which rows a claim may take: the one definition (`store/sql/claimable.rs`) in SQLite's spelling, the
/// refused ids as the JSON array `?2`.
macro_rules! claimable_rows {
    () => {
        crate::store::sql::claimable_rows!(
            deployment: "?1",
            not_refused: "j.id NOT IN (SELECT value FROM json_each(?2))",
            not_every_replica: "j.every_replica = 0",
        )
    };
}

/// The columns of a held row and of its run (`rules::Held`), as PostgreSQL's `held_rows!`; its instants
/// in RFC 3339, as the driver reads a `DateTime<Utc>` (the rules' layer knows no `At`).
macro_rules! held_rows {
    () => {
        concat!(
            "SELECT j.id, j.deployment_id, j.module_name, j.verb, j.schedule, j.timezone, ",
            attempt_instant!("j.next_execution"),
            " AS next_execution,
       j.paused, j.trigger_requested_at IS NOT NULL AS triggered, j.current_run_id,
       r.id IS NOT NULL AS recorded, ",
            attempt_instant!("r.scheduled_at"),
            " AS scheduled_at,
       coalesce(r.manual, false) AS manual,
       coalesce(r.backfill, false) AS backfill, j.retry_run_id, coalesce(r.attempts IS NOT NULL, false) AS retried,
       coalesce(json_array_length(r.attempts), 0) AS earlier_attempts, j.retries, j.backoff AS backoff_ms,
       j.catch_up_all, j.jitter_offset_ms,
       coalesce((SELECT min(b.scheduled_at) FROM cron_backfills b
                 WHERE b.module_name = j.module_name AND b.verb = j.verb)
                <= (SELECT now FROM temp.cron_clock), 0) AS backfill_queued,
       r.cancel_requested_by, r.cancel_note, ",
            attempt_instant!("(SELECT now FROM temp.cron_clock)"),
            " AS now
FROM cron_jobs j
LEFT JOIN cron_job_runs r ON r.id = j.current_run_id"
        )
    };
}

/// Creates the temporary table of the step's clock on a connection, if it is not there.
pub(super) const CLOCK_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS cron_clock
    (id INTEGER PRIMARY KEY CHECK (id = 1), now INTEGER NOT NULL)";

/// Sets the step's clock to `?1` (the host's clock once the transaction holds the file).
pub(super) const SET_CLOCK: &str = "INSERT INTO temp.cron_clock (id, now) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET now = excluded.now";

/// The statements of the store's steps on SQLite.
pub(super) const STEPS: Steps = Steps {
    every_replica: crate::store::sql::every_replica::Statements {
        record: "UPDATE cron_runners SET every_replica_runs = ?2 WHERE id = ?1",
        paused: "SELECT verb FROM cron_jobs
WHERE deployment_id = ?1 AND every_replica = 1 AND paused = 1 ORDER BY verb",
    },
    now: "SELECT (SELECT now FROM temp.cron_clock)",
    clock: "SELECT (SELECT now FROM temp.cron_clock)",
    insert_deployment: "INSERT INTO cron_deployments (key, module, schema, created_at)
VALUES (?1, ?2, ?3, (SELECT now FROM temp.cron_clock))
ON CONFLICT (key) DO NOTHING RETURNING id",
    registered: "SELECT id, module, CASE WHEN json(schema) = json(?2) THEN NULL ELSE schema END AS other_schema
FROM cron_deployments WHERE key = ?1",
    insert_jobs: "
INSERT INTO cron_jobs
    (deployment_id, module_name, verb, schedule, timezone, timeout, missed, next_execution, start_time,
     every_replica, lease, retries, backoff, catch_up, catch_up_all, jitter, jitter_offset_ms,
     code_schedule, code_timezone, fixed)
SELECT ?1, ?2, value ->> 0, value ->> 1, value ->> 2, CAST(round((value ->> 3) * 1000) AS INTEGER),
       value ->> 4, value ->> 5, (SELECT now FROM temp.cron_clock), value ->> 6, value ->> 7,
       value ->> 8, value ->> 9, value ->> 10, value ->> 11, value ->> 12, value ->> 13,
       value ->> 14, value ->> 15, value ->> 16
FROM json_each(?3)
WHERE true
ON CONFLICT (deployment_id, verb) DO NOTHING",
    insert_runner: "INSERT INTO cron_runners (deployment_id, host, pid, started_at, last_seen)
VALUES (?1, ?2, ?3, (SELECT now FROM temp.cron_clock), (SELECT now FROM temp.cron_clock)) RETURNING id",
    heartbeat: "INSERT INTO cron_runners (id, deployment_id, host, pid, last_seen) VALUES (?1, ?2, ?3, ?4, (SELECT now FROM temp.cron_clock))
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
    forget_runners: "DELETE FROM cron_runners WHERE last_seen < ?1",
    live_runners: "SELECT id FROM cron_runners WHERE deployment_id = ?1 AND last_seen >= ?2 AND draining = 0
ORDER BY id",
    drain_runner: "UPDATE cron_runners SET draining = 1 WHERE id = ?1",
    delete_runner: "DELETE FROM cron_runners WHERE id = ?1",
    overrides: "SELECT verb, schedule, timezone FROM cron_overrides WHERE module_name = ?1",
    drop_override: "DELETE FROM cron_overrides WHERE module_name = ?1 AND verb = ?2",
    overridden_rows: "
SELECT j.id, j.schedule, j.timezone, j.code_schedule, j.code_timezone, j.fixed, j.state,
       j.next_execution, j.retry_run_id IS NOT NULL AS retry_pending
FROM cron_deployments d
JOIN cron_jobs j ON j.deployment_id = d.id AND j.verb = ?2
WHERE d.module = ?1 AND j.code_schedule IS NOT NULL
ORDER BY j.id",
    reschedule_row: "
UPDATE cron_jobs SET schedule = ?2, timezone = ?3, code_schedule = ?4, code_timezone = ?5,
    next_execution = ?6, start_time = ?7
WHERE id = ?1",
    deployment_rows: "
SELECT j.id, j.verb, j.schedule, j.timezone, j.state, j.paused, j.next_execution,
       j.trigger_requested_at, j.lease_expires_at, j.every_replica, b.queued_at, j.code_schedule
FROM cron_jobs j
LEFT JOIN (
    SELECT verb, min(scheduled_at) AS queued_at FROM cron_backfills
    WHERE module_name = (SELECT module FROM cron_deployments WHERE id = ?1)
      AND scheduled_at <= (SELECT now FROM temp.cron_clock)
    GROUP BY verb
) b ON b.verb = j.verb
WHERE j.deployment_id = ?1 ORDER BY j.id",
    elected: "SELECT (
    SELECT d.id
    FROM cron_deployments d
    WHERE d.module = ?1
      AND EXISTS (SELECT 1 FROM cron_runners r WHERE r.deployment_id = d.id AND r.last_seen >= ?2)
    ORDER BY d.created_at DESC, d.id DESC
    LIMIT 1
) AS elected,
(SELECT active FROM cron_deployments WHERE id = ?3) AS active,
(SELECT key FROM cron_deployments WHERE module = ?1 AND active) AS active_key",
    // The transaction holds the file: no other takeover runs meanwhile.
    takeover_lock: "SELECT ?1 WHERE false",
    // SQLite holds the whole file from a write's start: nothing to lock row by row.
    own_verbs: "SELECT verb FROM cron_jobs WHERE deployment_id = ?1",
    takeover_rows: "SELECT ?1, ?2, ?3 WHERE false",
    previous_rows: crate::store::sql::previous_rows!(module: "?1", lock: ""),
    deactivate: "UPDATE cron_deployments SET active = false WHERE module = ?1 AND active RETURNING id, key",
    own_rows: "SELECT id, verb, schedule, timezone, state, every_replica FROM cron_jobs WHERE deployment_id = ?1 ORDER BY id",
    start_rows: "
UPDATE cron_jobs AS j SET next_execution = u.next_execution, start_time = u.start_time,
    retry_run_id = u.retry_run_id, overdue_notified_for = u.overdue_notified_for
FROM (SELECT value ->> 0 AS id, value ->> 1 AS next_execution, value ->> 2 AS start_time,
             value ->> 3 AS retry_run_id, value ->> 4 AS overdue_notified_for
      FROM json_each(?1)) AS u
WHERE j.id = u.id AND j.state = 'idle'",
    drop_previous_retries: "
UPDATE cron_jobs SET retry_run_id = NULL
WHERE deployment_id = ?1 AND state = 'idle' AND retry_run_id IS NOT NULL",
    carry_operator_state: "
UPDATE cron_jobs AS n
SET paused = n.paused OR o.paused,
    pause_note = CASE WHEN n.paused THEN n.pause_note ELSE o.pause_note END,
    paused_at = CASE WHEN n.paused THEN n.paused_at ELSE o.paused_at END,
    trigger_requested_at = coalesce(n.trigger_requested_at, o.trigger_requested_at)
FROM cron_jobs AS o
WHERE n.deployment_id = ?1 AND o.deployment_id = ?2 AND o.verb = n.verb
  AND (o.paused OR o.trigger_requested_at IS NOT NULL);
UPDATE cron_jobs SET trigger_requested_at = NULL
WHERE deployment_id = ?2 AND trigger_requested_at IS NOT NULL",
    activate: "UPDATE cron_deployments SET active = true, activated_at = (SELECT now FROM temp.cron_clock) WHERE id = ?1 RETURNING key",
    active: "SELECT active FROM cron_deployments WHERE id = ?1",
    active_among: "SELECT id FROM cron_deployments WHERE id IN (SELECT value FROM json_each(?1)) AND active",
    claim_due: concat!(
        "
WITH regular AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule, j.next_execution AS scheduled_at, false AS manual,
           false AS backfill, j.missed, j.catch_up AS catch_up_ms, j.catch_up_all, j.retry_run_id,
           CASE WHEN j.retry_run_id IS NOT NULL
               THEN (SELECT r.scheduled_at FROM cron_job_runs r WHERE r.id = j.retry_run_id) END AS retry_of,
           j.jitter_offset_ms, (SELECT now FROM temp.cron_clock) AS now
    ",
        claimable_rows!(),
        regular_occurrence!(),
        "
      AND j.next_execution <= (SELECT now FROM temp.cron_clock) + ?3
      AND ",
        due_start!(),
        " <= (SELECT now FROM temp.cron_clock) + ?3",
        crate::store::sql::spread_takes!(
            owned: [owned!("?5", "?6", "?7")],
            start: [due_start!()],
            grace_ago: "(SELECT now FROM temp.cron_clock) - ?8",
        ),
        "
    ORDER BY j.next_execution, j.id
    LIMIT ?4
),
manual AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule, j.trigger_requested_at AS scheduled_at, true AS manual,
           false AS backfill, j.missed, NULL AS catch_up_ms, j.catch_up_all, NULL AS retry_run_id,
           NULL AS retry_of, 0 AS jitter_offset_ms,
           (SELECT now FROM temp.cron_clock) AS now
    ",
        claimable_rows!(),
        "
      AND j.trigger_requested_at IS NOT NULL
      AND NOT coalesce(j.paused = 0 AND ",
        due_start!(),
        " <= (SELECT now FROM temp.cron_clock) + ?3, false)
    ORDER BY j.trigger_requested_at, j.id
    LIMIT ?4
),
backfill AS (
    SELECT j.id, j.verb, j.schedule, j.timezone, j.code_schedule,
           (SELECT min(b.scheduled_at) FROM cron_backfills b
            WHERE b.module_name = j.module_name AND b.verb = j.verb) AS scheduled_at,
           true AS manual, true AS backfill, j.missed, NULL AS catch_up_ms, j.catch_up_all,
           NULL AS retry_run_id, NULL AS retry_of, 0 AS jitter_offset_ms,
           (SELECT now FROM temp.cron_clock) AS now
    ",
        claimable_rows!(),
        queued_backfill!(),
        "
      AND j.trigger_requested_at IS NULL
      AND NOT coalesce(",
        due_start!(),
        " <= (SELECT now FROM temp.cron_clock) + ?3, false)
      AND (SELECT min(b.scheduled_at) FROM cron_backfills b
           WHERE b.module_name = j.module_name AND b.verb = j.verb) <= (SELECT now FROM temp.cron_clock)
    ORDER BY j.id
    LIMIT ?4
)
SELECT * FROM regular
UNION ALL
SELECT * FROM manual
UNION ALL
SELECT * FROM backfill
ORDER BY backfill, scheduled_at, id
LIMIT ?4"
    ),
    next_due: concat!(
        "
WITH first AS (
    SELECT ",
        due_start!(),
        " AS start
    ",
        claimable_rows!(),
        regular_occurrence!(),
        "
    ORDER BY j.next_execution, j.id
    LIMIT 1
),
own AS (
    SELECT ",
        due_start!(),
        " AS start
    ",
        claimable_rows!(),
        regular_occurrence!(),
        "
      AND ",
        owned!("?3", "?4", "?5"),
        "
    ORDER BY j.next_execution, j.id
    LIMIT 1
)
SELECT (SELECT now FROM temp.cron_clock) AS clock, (SELECT min(due) FROM (
    SELECT start AS due FROM own
    UNION ALL
    SELECT min(",
        due_start!(),
        ") AS due
    ",
        claimable_rows!(),
        regular_occurrence!(),
        "
      AND ",
        owned!("?3", "?4", "?5"),
        "
      AND j.next_execution < (SELECT start FROM own)
    UNION ALL
    SELECT start + ?6 AS due FROM first
    UNION ALL
    SELECT min(",
        due_start!(),
        ") + ?6 AS due
    ",
        claimable_rows!(),
        regular_occurrence!(),
        "
      AND j.next_execution < (SELECT start FROM first)
    UNION ALL
    SELECT * FROM (SELECT j.trigger_requested_at AS due
    ",
        claimable_rows!(),
        "
      AND j.trigger_requested_at IS NOT NULL
    ORDER BY j.trigger_requested_at, j.id
    LIMIT 1)
    UNION ALL
    SELECT * FROM (SELECT (SELECT min(b.scheduled_at) FROM cron_backfills b
                           WHERE b.module_name = j.module_name AND b.verb = j.verb) AS due
    ",
        claimable_rows!(),
        queued_backfill!(),
        "
    ORDER BY due
    LIMIT 1))) AS next_due"
    ),
    // The runs first, then the rows that got one: the run of a row is the one this transaction
    // recorded for its occurrence (claimed now by this runner), none where the occurrence already ran.
    claim_runs: "
INSERT INTO cron_job_runs
    (job_id, deployment_id, module_name, verb, scheduled_at, claimed_at, started_at, outcome,
     runner, runner_id, late, manual, backfill)
SELECT c.id, c.deployment_id, c.module_name, c.verb, i.at, (SELECT now FROM temp.cron_clock),
       CASE WHEN i.skip THEN NULL ELSE max((SELECT now FROM temp.cron_clock), i.start) END,
       'running', ?1, ?2, i.late, i.manual, i.backfill
FROM (SELECT value ->> 0 AS id, value ->> 1 AS at, value ->> 2 AS manual, value ->> 3 AS late,
             value ->> 4 AS skip, value ->> 5 AS backfill, value ->> 6 AS start
      FROM json_each(?4)) AS i
JOIN cron_jobs c ON c.id = i.id
WHERE true
ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING;
UPDATE cron_jobs AS j
SET state = 'executing',
    current_run_id = r.id,
    lease_expires_at = max((SELECT now FROM temp.cron_clock), coalesce(r.started_at, r.scheduled_at))
        + coalesce(j.lease * 1000, ?3),
    trigger_requested_at = CASE WHEN r.started_at IS NULL THEN j.trigger_requested_at END
FROM (SELECT value ->> 0 AS id, value ->> 1 AS at FROM json_each(?4)) AS i
JOIN cron_job_runs AS r ON r.scheduled_at = i.at
WHERE j.id = i.id
  AND j.state = 'idle'
  AND r.module_name = j.module_name AND r.verb = j.verb
  AND r.runner_id = ?2 AND r.outcome = 'running'
  AND r.claimed_at = (SELECT now FROM temp.cron_clock)
RETURNING id AS job_id, current_run_id AS run_id, lease_expires_at",
    // The runs first, then their rows: a run taken again is claimed now by this runner.
    retry_runs: "
UPDATE cron_job_runs AS r
SET claimed_at = (SELECT now FROM temp.cron_clock), started_at = max((SELECT now FROM temp.cron_clock), j.next_execution), runner = ?1,
    runner_id = ?2, job_id = j.id, deployment_id = j.deployment_id
FROM (SELECT value ->> 0 AS id, value ->> 1 AS run_id FROM json_each(?4)) AS i
JOIN cron_jobs AS j ON j.id = i.id
WHERE r.id = i.run_id AND r.outcome = 'running' AND r.finished_at IS NULL
  AND j.retry_run_id = r.id AND j.state = 'idle';
UPDATE cron_jobs AS j
SET state = 'executing',
    current_run_id = r.id,
    lease_expires_at = max((SELECT now FROM temp.cron_clock), j.next_execution) + coalesce(j.lease * 1000, ?3)
FROM cron_job_runs AS r
WHERE j.id IN (SELECT value ->> 0 FROM json_each(?4))
  AND j.state = 'idle' AND r.id = j.retry_run_id
  AND r.runner_id = ?2 AND r.claimed_at = (SELECT now FROM temp.cron_clock)
RETURNING id AS job_id, current_run_id AS run_id, next_execution AS retry_at,
          (SELECT coalesce(json_array_length(a.attempts), 0) + 1 FROM cron_job_runs a
           WHERE a.id = current_run_id) AS attempt,
          lease_expires_at",
    drop_trigger: "UPDATE cron_jobs SET trigger_requested_at = NULL WHERE id = ?1 AND trigger_requested_at = ?2",
    move_past_ran: "UPDATE cron_jobs SET next_execution = ?2 WHERE id = ?1 AND state = 'idle' AND next_execution = ?3",
    cut_short: concat!(
        "
UPDATE cron_job_runs
SET outcome = 'failed', error = ?3, finished_at = (SELECT now FROM temp.cron_clock),
    started_at = coalesce(",
        micros_of_text!("json_extract(attempts, '$[0].started_at')"),
        ", started_at)
WHERE id = ?2 AND outcome = 'running';
UPDATE cron_jobs SET next_execution = ?4, retry_run_id = NULL
WHERE id = ?1 AND state = 'idle' AND retry_run_id = ?2"
    ),
    held_by_runs: concat!(
        held_rows!(),
        "
JOIN json_each(?2) AS h ON j.current_run_id = h.value ->> 0 AND j.id = h.value ->> 1
WHERE j.state = 'executing'
  AND r.runner_id = ?1
ORDER BY j.id"
    ),
    held_by_run_ids: concat!(
        held_rows!(),
        "
WHERE j.current_run_id IN (SELECT value FROM json_each(?1))
  AND j.state = 'executing'
  AND r.runner_id = ?2
ORDER BY j.id"
    ),
    // The transaction holds the file: the rows are the step's until it commits.
    lock_executing: "SELECT ?1 WHERE false",
    held_by_runner: concat!(
        held_rows!(),
        "
WHERE j.deployment_id = ?2
  AND j.state = 'executing'
  AND r.runner_id = ?1
ORDER BY j.id"
    ),
    expired: concat!(
        held_rows!(),
        "
WHERE j.state = 'executing'
  AND j.lease_expires_at < (SELECT now FROM temp.cron_clock)
  AND j.id NOT IN (SELECT value FROM json_each(?1))
ORDER BY j.lease_expires_at
LIMIT ?2"
    ),
    // `expired` reads the rows whose run has no record too: no statement more at a heartbeat.
    expired_unrecorded: None,
    // Outside a step's transaction: the clock set as it got its connection.
    renew: "
UPDATE cron_jobs AS j
SET lease_expires_at = max(j.lease_expires_at, (SELECT now FROM temp.cron_clock) + coalesce(j.lease * 1000, ?3))
FROM cron_job_runs AS r
WHERE r.id IN (SELECT value FROM json_each(?1))
  AND r.runner_id = ?2
  AND j.id = r.job_id AND j.current_run_id = r.id
  AND j.state = 'executing'
RETURNING current_run_id",
    end_jobs: "
UPDATE cron_jobs AS j
SET state = CASE WHEN e.run_id IS NULL THEN 'idle' ELSE 'executing' END,
    next_execution = e.next_execution,
    current_run_id = e.run_id,
    lease_expires_at = e.lease_expires_at,
    trigger_requested_at = coalesce(j.trigger_requested_at, e.trigger_requested_at),
    retry_run_id = e.retry_run_id
FROM (SELECT value ->> 0 AS id, value ->> 1 AS next_execution, value ->> 2 AS run_id,
             value ->> 3 AS lease_expires_at, value ->> 4 AS trigger_requested_at,
             value ->> 5 AS retry_run_id
      FROM json_each(?1)) AS e
WHERE j.id = e.id",
    end_runs: concat!(
        "
UPDATE cron_job_runs AS r
SET outcome = CASE WHEN e.waits THEN 'running' ELSE e.outcome END,
    error = e.error, skipped = e.skipped,
    attempts = CASE WHEN e.push THEN json_insert(coalesce(r.attempts, '[]'), '$[#]', json_object(
            'outcome', e.attempt_outcome,
            'error', e.attempt_error,
            'started_at', ",
        attempt_instant!("(CASE WHEN e.reported THEN e.started ELSE r.started_at END)"),
        ",
            'finished_at', ",
        attempt_instant!(
            "max(coalesce(CASE WHEN e.reported THEN e.started ELSE r.started_at END, e.ended), e.ended)"
        ),
        "))
        ELSE r.attempts END,
    started_at = CASE
        WHEN e.push AND NOT e.waits THEN coalesce(",
        micros_of_text!("json_extract(r.attempts, '$[0].started_at')"),
        ",
            CASE WHEN e.reported THEN e.started ELSE r.started_at END)
        WHEN e.reported THEN e.started ELSE r.started_at END,
    finished_at = CASE WHEN e.waits THEN NULL
        ELSE max(coalesce(CASE WHEN e.reported THEN e.started ELSE r.started_at END, e.ended), e.ended) END
FROM (SELECT value ->> 0 AS id, value ->> 1 AS outcome, value ->> 2 AS error, value ->> 3 AS skipped,
             value ->> 4 AS ended, value ->> 5 AS reported, value ->> 6 AS started,
             value ->> 7 AS push, value ->> 8 AS waits, value ->> 9 AS attempt_outcome,
             value ->> 10 AS attempt_error
      FROM json_each(?1)) AS e
WHERE r.id = e.id AND r.outcome = 'running'"
    ),
    cancels: "
SELECT id, cancel_requested_by, cancel_note FROM cron_job_runs
WHERE id IN (SELECT value FROM json_each(?1)) AND cancel_requested_by IS NOT NULL",
    drop_runs: "DELETE FROM cron_job_runs WHERE id IN (SELECT value FROM json_each(?1))",
    chain_runs: "
INSERT INTO cron_job_runs
    (job_id, deployment_id, module_name, verb, scheduled_at, claimed_at, started_at, outcome,
     runner, runner_id, late, manual)
SELECT c.id, c.deployment_id, c.module_name, c.verb, i.at, (SELECT now FROM temp.cron_clock),
       max((SELECT now FROM temp.cron_clock), i.start), 'running', ?1, ?2, false, false
FROM (SELECT value ->> 0 AS id, value ->> 1 AS at, value ->> 2 AS start FROM json_each(?4)) AS i
JOIN cron_jobs c ON c.id = i.id
WHERE true
ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
RETURNING id AS run_id, job_id,
          started_at
              + coalesce((SELECT c.lease * 1000 FROM cron_jobs c WHERE c.id = job_id), ?3) AS lease_expires_at,
          (SELECT now FROM temp.cron_clock) AS clock",
    carried_rows: crate::store::sql::carried_rows!(
        held: "IN (SELECT value FROM json_each(?1))",
        lock: "",
    ),
    carry_to_active: "
UPDATE cron_jobs AS j
SET next_execution = w.next_execution, trigger_requested_at = w.trigger_requested_at,
    retry_run_id = coalesce(w.retry_run_id, j.retry_run_id)
FROM (SELECT value ->> 0 AS id, value ->> 1 AS next_execution,
             value ->> 2 AS trigger_requested_at, value ->> 3 AS retry_run_id
      FROM json_each(?1)) AS w
WHERE j.id = w.id",
    move_retries: "
UPDATE cron_job_runs AS r
SET job_id = w.job_id, deployment_id = w.deployment_id
FROM (SELECT value ->> 0 AS id, n.id AS job_id, n.deployment_id
      FROM json_each(?1) JOIN cron_jobs n ON n.id = value ->> 1) AS w
WHERE r.id = w.id",
    end_orphaned_retries: concat!(
        "
UPDATE cron_job_runs AS r
SET outcome = 'failed', error = o.error, finished_at = (SELECT now FROM temp.cron_clock),
    started_at = coalesce(",
        micros_of_text!("json_extract(r.attempts, '$[0].started_at')"),
        ", r.started_at)
FROM (SELECT value ->> 0 AS id, value ->> 1 AS error FROM json_each(?1)) AS o
WHERE r.id = o.id AND r.outcome = 'running'"
    ),
    running_schedules: "
SELECT id, verb, schedule, timezone FROM cron_jobs WHERE deployment_id = ?1 AND NOT every_replica",
    // SQLite's write transaction holds the rows from the read to the record.
    overdue_rows: crate::store::sql::overdue_rows!(
        deployment: "?1",
        expected: "(SELECT value ->> 0 AS verb, value ->> 1 AS occurrence, value ->> 2 AS deadline
      FROM json_each(?2)) AS e",
        lock: "",
    ),
    mark_overdue: crate::store::sql::mark_overdue!(
        rows: "(SELECT value ->> 0 AS id, value ->> 1 AS occurrence FROM json_each(?1)) AS w",
    ),
};

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use sqlx::{Connection, Executor, SqliteConnection};

    use super::*;

    /// Every statement of [`STEPS`] by name, each part of a text that writes two tables apart.
    fn statements() -> Vec<(&'static str, &'static str)> {
        let Steps {
            every_replica,
            now,
            clock,
            insert_deployment,
            registered,
            insert_jobs,
            insert_runner,
            heartbeat,
            forget_runners,
            live_runners,
            drain_runner,
            delete_runner,
            overrides,
            drop_override,
            overridden_rows,
            reschedule_row,
            deployment_rows,
            elected,
            takeover_lock,
            own_verbs,
            takeover_rows,
            previous_rows,
            deactivate,
            own_rows,
            start_rows,
            drop_previous_retries,
            carry_operator_state,
            activate,
            active,
            active_among,
            claim_due,
            next_due,
            claim_runs,
            retry_runs,
            drop_trigger,
            move_past_ran,
            cut_short,
            held_by_runs,
            held_by_run_ids,
            lock_executing,
            held_by_runner,
            expired,
            expired_unrecorded: _,
            renew,
            cancels,
            end_jobs,
            end_runs,
            drop_runs,
            chain_runs,
            carried_rows,
            carry_to_active,
            move_retries,
            end_orphaned_retries,
            running_schedules,
            overdue_rows,
            mark_overdue,
        } = STEPS;
        let texts = [
            ("every_replica.record", every_replica.record),
            ("every_replica.paused", every_replica.paused),
            ("now", now),
            ("clock", clock),
            ("insert_deployment", insert_deployment),
            ("registered", registered),
            ("insert_jobs", insert_jobs),
            ("insert_runner", insert_runner),
            ("heartbeat", heartbeat),
            ("forget_runners", forget_runners),
            ("live_runners", live_runners),
            ("drain_runner", drain_runner),
            ("delete_runner", delete_runner),
            ("overrides", overrides),
            ("drop_override", drop_override),
            ("overridden_rows", overridden_rows),
            ("reschedule_row", reschedule_row),
            ("deployment_rows", deployment_rows),
            ("elected", elected),
            ("takeover_lock", takeover_lock),
            ("own_verbs", own_verbs),
            ("takeover_rows", takeover_rows),
            ("previous_rows", previous_rows),
            ("deactivate", deactivate),
            ("own_rows", own_rows),
            ("start_rows", start_rows),
            ("drop_previous_retries", drop_previous_retries),
            ("carry_operator_state", carry_operator_state),
            ("activate", activate),
            ("active", active),
            ("active_among", active_among),
            ("claim_due", claim_due),
            ("next_due", next_due),
            ("claim_runs", claim_runs),
            ("retry_runs", retry_runs),
            ("drop_trigger", drop_trigger),
            ("move_past_ran", move_past_ran),
            ("cut_short", cut_short),
            ("held_by_runs", held_by_runs),
            ("held_by_run_ids", held_by_run_ids),
            ("lock_executing", lock_executing),
            ("held_by_runner", held_by_runner),
            ("expired", expired),
            ("renew", renew),
            ("cancels", cancels),
            ("end_jobs", end_jobs),
            ("end_runs", end_runs),
            ("drop_runs", drop_runs),
            ("chain_runs", chain_runs),
            ("carried_rows", carried_rows),
            ("carry_to_active", carry_to_active),
            ("move_retries", move_retries),
            ("end_orphaned_retries", end_orphaned_retries),
            ("running_schedules", running_schedules),
            ("overdue_rows", overdue_rows),
            ("mark_overdue", mark_overdue),
        ];
        texts
            .into_iter()
            .flat_map(|(name, text)| text.split(";\n").map(move |part| (name, part)))
            .collect()
    }

    /// A connection to a migrated database in memory, with the step's clock set.
    async fn migrated() -> SqliteConnection {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        super::super::MIGRATOR.run(&mut conn).await.unwrap();
        conn.execute(CLOCK_TABLE).await.unwrap();
        conn.execute(sqlx::query(SET_CLOCK).bind(1_i64))
            .await
            .unwrap();
        conn
    }

    /// Every statement prepares against the migrated schema: SQLite checks its syntax, its tables and
    /// columns.
    #[tokio::test]
    async fn every_statement_prepares_against_the_migrated_schema() {
        let mut conn = migrated().await;
        let mut failed = Vec::new();
        for (name, part) in statements() {
            if let Err(error) = (&mut conn).prepare(part).await {
                failed.push(format!("{name}: {error}\n{part}"));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    }

    /// The backfill's statements, written once for both databases with `$N` parameters
    /// (`crate::admin::backfill`, `store::sql::backfill`), prepare on SQLite too.
    #[tokio::test]
    async fn the_backfill_statements_prepare_against_the_migrated_schema() {
        let mut conn = migrated().await;
        for (name, text) in crate::admin::backfill::statements() {
            if let Err(error) = (&mut conn).prepare(text).await {
                panic!("{name}: {error}\n{text}");
            }
        }
    }

    /// The read of a handler's previous success (`store::sql::history`), written once for both
    /// databases, prepares on SQLite and searches an index of the history by verb and instant from the
    /// run's instant down, with no sort: it stops at the first run that succeeded.
    #[tokio::test]
    async fn the_previous_success_searches_the_historys_unique_key() {
        let mut conn = migrated().await;
        let sql = crate::store::sql::history::PREVIOUS_SUCCESS;
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let plan: Vec<String> = plan.into_iter().map(|(.., detail)| detail).collect();
        assert!(
            matches!(&plan[..], [search] if search.starts_with("SEARCH cron_job_runs USING INDEX")
                && search.contains("verb=? AND scheduled_at<?")),
            "{plan:?}"
        );
    }

    /// Every part of a text that writes two tables gets the parameters it reads. sqlx binds the parts
    /// of one text in turn with the same values, and takes a number a part does not read for the next
    /// value not yet taken by position: once those run out, it binds nothing more, and the part's later
    /// parameters read NULL.
    #[test]
    fn every_part_of_a_text_gets_its_parameters() {
        let numbers = |text: &str| -> Vec<usize> {
            text.split('?')
                .skip(1)
                .filter_map(|after| {
                    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
                .collect()
        };
        let mut texts: Vec<(&str, Vec<&str>)> = Vec::new();
        for (name, part) in statements() {
            match texts.last_mut() {
                Some((last, parts)) if *last == name => parts.push(part),
                _ => texts.push((name, vec![part])),
            }
        }
        for (name, parts) in texts {
            let values = numbers(&parts.concat()).into_iter().max().unwrap_or(0);
            let mut by_position = 0;
            for part in parts {
                let read = numbers(part);
                let last = read.iter().copied().max().unwrap_or(0);
                for number in (1..=last).filter(|n| !read.contains(n)) {
                    by_position += 1;
                    assert!(
                        by_position <= values,
                        "{name}: `?{number}` takes a value by position past the last"
                    );
                }
            }
        }
    }

    /// The overdue check's read walks the expected occurrences bound and finds each one's row by its
    /// key (deployment, verb), not every row of the deployment, each re-reading the whole batch.
    #[tokio::test]
    async fn the_overdue_read_finds_each_expected_row_by_its_key() {
        let mut conn = migrated().await;
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {}", STEPS.overdue_rows))
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let plan: Vec<String> = plan.into_iter().map(|(.., detail)| detail).collect();
        let json = plan.iter().position(|d| d.contains("json_each"));
        let jobs = plan
            .iter()
            .position(|d| d.starts_with("SEARCH j ") && d.contains("deployment_id=? AND verb=?"));
        assert!(
            matches!((json, jobs), (Some(json), Some(jobs)) if json < jobs),
            "{plan:#?}"
        );
    }

    /// No statement reads a whole table of the store's, or joins the rows bound on their index: each
    /// finds its rows by an index, from the ids, keys or rows bound, so that a step costs as much as
    /// its batch, whatever the size of the tables. What may be scanned: the rows bound (`json_each`), the claim's subqueries over its
    /// index, the one row of the step's clock, and the replicas (a few rows) that a heartbeat forgets.
    #[tokio::test]
    async fn every_statement_searches_the_tables_by_an_index() {
        let mut conn = migrated().await;
        let mut scans = Vec::new();
        for (name, part) in statements() {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(&format!("EXPLAIN QUERY PLAN {part}"))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            let plan: Vec<String> = plan.into_iter().map(|(.., detail)| detail).collect();
            let scanned = |detail: &String| {
                let Some(scan) = detail.strip_prefix("SCAN ") else {
                    return false;
                };
                let table = scan.split(' ').next().unwrap_or_default();
                !scan.contains("VIRTUAL TABLE")
                    && ![
                        "temp.cron_clock",
                        "CONSTANT",
                        "regular",
                        "manual",
                        "backfill",
                        // `next_due`'s first regular row, and its first owned one: one row each.
                        "first",
                        "own",
                    ]
                    .contains(&table)
                    && !table.starts_with("(subquery-")
                    && name != "forget_runners"
                    && name != "live_runners"
            };
            // The claim reads a deployment's due rows in order, from the indexes made for it: not
            // every row of the deployment.
            let claims = ["claim_due", "next_due"].contains(&name);
            let indexed = ["cron_jobs_due", "cron_jobs_triggered"]
                .iter()
                .all(|index| plan.iter().any(|detail| detail.contains(index)));
            // A batch is read by one `json_each`: one joined on another's index (`key`) is searched
            // by a walk of its array per row.
            let joined_on_index = part.contains(".key");
            if plan.iter().any(scanned) || (claims && !indexed) || joined_on_index {
                scans.push(format!("{name}:\n  {}\n{part}", plan.join("\n  ")));
            }
        }
        assert!(scans.is_empty(), "{}", scans.join("\n\n"));
    }

    /// An attempt's instants, written in SQL from microseconds, read back as `serde_json` reads an
    /// `Attempt`'s, and read back in SQL, to the microsecond.
    #[tokio::test]
    async fn attempt_instants_round_trip_through_their_json_text() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let at = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let (text,): (String,) =
            sqlx::query_as(concat!("SELECT json_quote(", attempt_instant!("?1"), ")"))
                .bind(1_700_000_000_123_456_i64)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        let read: DateTime<Utc> = serde_json::from_str(&text).unwrap();
        assert_eq!(read, at);
        let (back,): (i64,) =
            sqlx::query_as(concat!("SELECT ", micros_of_text!("json(?1) ->> '$'")))
                .bind(&text)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(back, 1_700_000_000_123_456);
    }
}
