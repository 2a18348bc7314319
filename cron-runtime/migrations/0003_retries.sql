-- Retries (docs/runtime.md, "Retries"). Additive ("Migrations across releases"): nullable columns, so a
-- release that does not know them keeps working; it runs a pending retry it claims as a plain run.
--
-- The run whose retry is pending (the job idle at the retry's instant, held for it) or executing
-- (`current_run_id = retry_run_id`); NULL otherwise.
ALTER TABLE cron_jobs ADD COLUMN retry_run_id BIGINT;
-- The attempts of an occurrence tried more than once, as a JSON array of
-- {"outcome", "error", "started_at", "finished_at"}: the ones ended so far, the last one included once
-- the occurrence has ended. NULL for an occurrence that ended at its first attempt. While a retry
-- waits, the run stays `running` with no `finished_at`.
ALTER TABLE cron_job_runs ADD COLUMN attempts JSONB;
