-- When each run was claimed (docs/operations.md, "The tables"). Additive ("Migrations across
-- releases"): nullable, so that a release that does not know it still inserts runs; its runs have none.
-- From this release `started_at` is when the handler was first polled, as the replica that ran it
-- measured it, written with the run's end; until then it holds the claim's planned start.
ALTER TABLE cron_job_runs ADD COLUMN claimed_at TIMESTAMPTZ;
