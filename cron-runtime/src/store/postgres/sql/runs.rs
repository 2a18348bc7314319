//! `cron_job_runs`: the run history. Runs are recorded by a claim (or a chained claim) and ended by
//! `write_ends` (`store/sql/end.rs`), which every path that ends a run goes through; with them, the
//! two statements by which runs of a replaced deployment reach the active deployment's rows
//! (`carry`, beside it).

statements! { "runs";
    /// The claim's second statement: records one run per accepted row, one element of each array of
    /// `$4`..`$10` per row (job, scheduled instant, manual, late, skipped, backfill, and when it is due
    /// to start: its instant, or a regular occurrence's jittered start, `rules::jittered`), by runner
    /// `$1` (id `$2`), and moves the rows that got one to `executing` with the job's own lease, else
    /// `$3` seconds, from the later of now and the run's start. The unique key on `(module_name, verb, scheduled_at)` refuses an occurrence that already
    /// ran: that row gets no run. A late row under `missed = 'skip'` gets a run with no start, which the
    /// claim ends `skipped` at once; the claim clears a pending trigger unless the occurrence it took is
    /// skipped.
    ///
    /// The rows are the ones the claim's first statement locked in the same transaction, so nothing can
    /// change them in between. Its only inputs are arrays of the same length, so it is prepared once per
    /// connection: no large constant to plan. Both halves reach the job rows through the primary key, one
    /// probe per row (the `LIMIT 1` keeps the lateral subquery from being flattened into a join, and
    /// `= ANY($4)` gives the update an index path), where joins would hash the whole table for a batch of
    /// a thousand rows (docs/benchmarks.md).
    CLAIM_RUNS = concat!("
WITH due AS (
    SELECT * FROM unnest($4::bigint[], $5::timestamptz[], $6::bool[], $7::bool[], $8::bool[],
                         $9::bool[], $10::timestamptz[])
        AS d(id, scheduled_at, manual, late, skip, backfill, start)
),
runs AS (
    INSERT INTO cron_job_runs AS r
        (job_id, deployment_id, module_name, verb, scheduled_at, claimed_at, started_at, outcome,
         runner, runner_id, late, manual, backfill)
    SELECT j.id, j.deployment_id, j.module_name, j.verb, due.scheduled_at, now(),
           CASE WHEN due.skip THEN NULL ELSE ", claimed_start!("due.start"), " END,
           'running', $1, $2, due.late, due.manual, due.backfill
    FROM due
    CROSS JOIN LATERAL (
        SELECT c.id, c.deployment_id, c.module_name, c.verb FROM cron_jobs c WHERE c.id = due.id LIMIT 1
    ) j
    ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
    RETURNING r.id, r.job_id, r.started_at, r.scheduled_at
)
UPDATE cron_jobs j
SET state = 'executing',
    current_run_id = runs.id,
    lease_expires_at = ", lease_from!("coalesce(runs.started_at, runs.scheduled_at)", "j.lease", "$3"), ",
    trigger_requested_at = CASE WHEN runs.started_at IS NULL THEN j.trigger_requested_at END
FROM runs
WHERE j.id = runs.job_id
  AND j.id = ANY($4::bigint[])
RETURNING j.id AS job_id, runs.id AS run_id, j.lease_expires_at
");

    /// The runs of the next occurrences that a batch of ended runs claims (a chained claim), one per
    /// job of `$4` at its instant of `$5`, due to start at `$6` (its jittered start,
    /// `rules::jittered`), by runner `$1` (id `$2`) with a lease of `$3` seconds from then, unless
    /// the occurrence already has one. Which jobs may be claimed is decided on the locked rows before
    /// (`may_chain`). Reaches the rows by primary key, as
    /// [`CLAIM_RUNS`] does. Returns the database's clock as it answers.
    CHAIN_RUNS = concat!("
INSERT INTO cron_job_runs AS r
    (job_id, deployment_id, module_name, verb, scheduled_at, claimed_at, started_at, outcome,
     runner, runner_id, late, manual)
SELECT j.id, j.deployment_id, j.module_name, j.verb, e.scheduled_at, now(),
       ", claimed_start!("e.start"), ", 'running', $1, $2, false, false
FROM unnest($4::bigint[], $5::timestamptz[], $6::timestamptz[]) AS e(id, scheduled_at, start)
CROSS JOIN LATERAL (
    SELECT c.id, c.deployment_id, c.module_name, c.verb FROM cron_jobs c WHERE c.id = e.id LIMIT 1
) j
ON CONFLICT (module_name, verb, scheduled_at) DO NOTHING
RETURNING r.id AS run_id, r.job_id,
          ", lease_from!(
              "r.started_at",
              "(SELECT c.lease FROM cron_jobs c WHERE c.id = r.job_id)",
              "$3"
          ), " AS lease_expires_at,
          clock_timestamp() AS clock
");

    /// The run side of ending runs, one element of each array per run (`write_ends`): how each ended
    /// (outcome, error, occurrences skipped), when, never before it started, and when it started: the
    /// executor's measure where it reported one (`reported`, then `started`), else the claim's planned
    /// start stays (docs/operations.md, "The tables"). Only a run still `running` is written.
    ///
    /// Retries (docs/runtime.md, "Retries"): where `push` is set, the attempt that ended (its own outcome
    /// and error, `attempt_outcome` and `attempt_error`, its start and end) is appended to `attempts`;
    /// a run that `waits` for its retry stays `running` with no end, and a run with attempts that ends
    /// for good started with its first attempt. A run without attempts is written as before.
    END_RUNS = "
UPDATE cron_job_runs r
SET outcome = CASE WHEN e.waits THEN 'running' ELSE e.outcome END,
    error = e.error, skipped = e.skipped,
    attempts = CASE WHEN e.push THEN coalesce(r.attempts, '[]'::jsonb) || jsonb_build_array(
            jsonb_build_object(
                'outcome', e.attempt_outcome,
                'error', e.attempt_error,
                'started_at', CASE WHEN e.reported THEN e.started ELSE r.started_at END,
                'finished_at', greatest(CASE WHEN e.reported THEN e.started ELSE r.started_at END, e.ended)))
        ELSE r.attempts END,
    started_at = CASE
        WHEN e.push AND NOT e.waits THEN coalesce((r.attempts->0->>'started_at')::timestamptz,
            CASE WHEN e.reported THEN e.started ELSE r.started_at END)
        WHEN e.reported THEN e.started ELSE r.started_at END,
    finished_at = CASE WHEN e.waits THEN NULL
        ELSE greatest(CASE WHEN e.reported THEN e.started ELSE r.started_at END, e.ended) END
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[], $6::bool[],
            $7::timestamptz[], $8::bool[], $9::bool[], $10::text[], $11::text[])
     AS e(id, outcome, error, skipped, ended, reported, started, push, waits, attempt_outcome,
          attempt_error)
WHERE r.id = e.id AND r.outcome = 'running'
";

    /// The claim's statement for retries (docs/runtime.md, "Retries"): takes the runs `$5` again, one
    /// per idle row of `$4` holding it for a retry due at the row's `next_execution`, by runner `$1`
    /// (id `$2`), and moves the rows to `executing` with a lease of `$3` seconds from the later of now
    /// and the retry's instant. A run that is no longer waiting for its retry is left alone, and so is
    /// its row. Returns which attempt each run now is.
    RETRY_RUNS = concat!("
WITH due AS (
    SELECT * FROM unnest($4::bigint[], $5::bigint[]) AS d(job_id, run_id)
),
runs AS (
    UPDATE cron_job_runs r
    SET claimed_at = now(), started_at = ", claimed_start!("j.next_execution"), ", runner = $1,
        runner_id = $2, job_id = j.id, deployment_id = j.deployment_id
    FROM due JOIN cron_jobs j ON j.id = due.job_id
    WHERE r.id = due.run_id AND r.outcome = 'running' AND r.finished_at IS NULL
      AND j.retry_run_id = r.id AND j.state = 'idle'
    RETURNING r.id, j.id AS job_id, j.next_execution AS retry_at,
              coalesce(jsonb_array_length(r.attempts), 0) + 1 AS attempt
)
UPDATE cron_jobs j
SET state = 'executing',
    current_run_id = runs.id,
    lease_expires_at = ", lease_from!("runs.retry_at", "j.lease", "$3"), "
FROM runs
WHERE j.id = runs.job_id
RETURNING j.id AS job_id, runs.id AS run_id, runs.retry_at, runs.attempt::integer AS attempt,
          j.lease_expires_at
");

    /// At a takeover, the runs `$1` whose retries were pending for verbs the new deployment does not
    /// take end `failed`, each with its error of `$2` (`rules::take_over`), started with their first
    /// attempt.
    END_ORPHANED_RETRIES = "
UPDATE cron_job_runs r
SET outcome = 'failed', error = o.error, finished_at = now(),
    started_at = coalesce((r.attempts->0->>'started_at')::timestamptz, r.started_at)
FROM unnest($1::bigint[], $2::text[]) AS o(id, error)
WHERE r.id = o.id AND r.outcome = 'running'
";

    /// The operator's requests to cancel any of the runs `$1` (`cronverb cancel`, migration `0010`):
    /// the run, who asked and the note. Read by the primary key, one probe per run in flight: among a
    /// million runs, 2 ms for 1,000 runs in flight and 29 ms for 10,000 (30,000 buffers). A partial
    /// index of the runs asked to stop would take the 10,000 in 2 ms; not worth a migration while a
    /// replica holds thousands at most, and reads them at a wake-up or every renewal period.
    CANCELS = "
SELECT id, cancel_requested_by, cancel_note FROM cron_job_runs
WHERE id = ANY($1::bigint[]) AND cancel_requested_by IS NOT NULL
";

    /// Drops the records of the runs `$1`, given back before they started (`write_ends`).
    DROP_RUNS = "DELETE FROM cron_job_runs WHERE id = ANY($1::bigint[])";

    /// What ended runs of replaced deployments carry (`end::carry`, docs/operations.md, G6): for each
    /// held row of `$1`, the active deployment's row of its verb, locked in the order of its id, with
    /// the facts the rules decide on (`rules::ActiveRow`): idle, the same schedule text and zone,
    /// its next occurrence, its pending trigger, and whether it holds a retry.
    CARRIED_ROWS = crate::store::sql::carried_rows!(
        held: "= ANY($1::bigint[])",
        lock: "FOR UPDATE OF n",
    );

    /// Writes what the rules computed for the rows [`CARRIED_ROWS`] read (`rules::Carry::onto`), one
    /// element of each array per row: its next occurrence, its pending trigger, and the retry it holds
    /// from now on (NULL: the one it holds, if any).
    CARRY_TO_ACTIVE = "
UPDATE cron_jobs j
SET next_execution = w.next_execution, trigger_requested_at = w.trigger_requested_at,
    retry_run_id = coalesce(w.retry_run_id, j.retry_run_id)
FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[], $4::bigint[])
    AS w(id, next_execution, trigger_requested_at, retry_run_id)
WHERE j.id = w.id
";

    /// The runs `$1` whose pending retries the active deployment's rows `$2` took
    /// (`rules::Carry::Retry`) are those rows' runs from now on.
    MOVE_RETRIES = "
UPDATE cron_job_runs r
SET job_id = w.job_id, deployment_id = n.deployment_id
FROM unnest($1::bigint[], $2::bigint[]) AS w(id, job_id)
JOIN cron_jobs n ON n.id = w.job_id
WHERE r.id = w.id
";
}
