-- The physical limit of a claim-and-complete cycle on one PostgreSQL, for `examples/bench.rs`
-- (`--scenario limit`), which creates the tables below in a fresh database and runs:
--
--   pgbench -n -M prepared -T 10 -c <clients> -j <min(clients, cores)> -D batch=1 \
--       -f scripts/bench-pg-limit.sql <database url>
--
-- with <clients> the machine's cores and twice as many by default (`--limit-clients`).
--
-- One script execution claims up to :batch due rows (one statement: pick, record a run per row, mark
-- the rows executing) and completes them (one transaction: record the runs' outcome, put the rows back
-- to idle with their next occurrence). Two commits per execution, as cronverb's claim and finish; rows
-- per second = tps x batch. The tables are cron_jobs and cron_job_runs reduced to what the cycle touches:
--
--   limit_jobs(id, next_execution, state, runner, current_run_id), partial index on next_execution of
--     idle rows and on runner of executing rows
--   limit_runs(id, job_id, scheduled_at, started_at, finished_at, outcome, runner),
--     UNIQUE (job_id, scheduled_at), partial index on runner of running rows

WITH due AS (
    SELECT id, next_execution FROM limit_jobs
    WHERE state = 'idle' AND next_execution <= now()
    ORDER BY next_execution
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
),
runs AS (
    INSERT INTO limit_runs (job_id, scheduled_at, runner)
    SELECT id, next_execution, :client_id FROM due
    RETURNING id, job_id
)
UPDATE limit_jobs j
SET state = 'executing', runner = :client_id, current_run_id = runs.id
FROM runs
WHERE j.id = runs.job_id;

BEGIN;
UPDATE limit_runs SET outcome = 'succeeded', finished_at = now()
WHERE runner = :client_id AND outcome = 'running';
UPDATE limit_jobs
SET state = 'idle', runner = NULL, current_run_id = NULL,
    next_execution = next_execution + interval '1 second'
WHERE state = 'executing' AND runner = :client_id;
COMMIT;
