-- Retries (docs/runtime.md, "Retries"; docs/operations.md, "The tables"). Additive ("Migrations across
-- releases"): both columns are nullable, so that a release that does not know them still claims and
-- records runs; its runs have no attempts and its rows no pending retry.
--
-- The run whose retry is pending: while the job is idle, its `next_execution` is the retry's instant;
-- while it is executing, `current_run_id = retry_run_id` and the run is that retry. NULL otherwise.
ALTER TABLE cron_jobs ADD COLUMN retry_run_id INTEGER;
-- The attempts ended so far of an occurrence tried more than once, in order: a JSON array of
-- `{"outcome", "error", "started_at", "finished_at"}` (instants as RFC 3339 text), the last attempt
-- included once the run has ended. NULL for an occurrence that ended at its first attempt. While a
-- retry waits, the run stays `running` with `finished_at` NULL.
ALTER TABLE cron_job_runs ADD COLUMN attempts TEXT CHECK (attempts IS NULL OR json_valid(attempts));
