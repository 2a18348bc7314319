-- What the operator commands need (docs/operations.md, "Operator commands"): pausing with a note,
-- triggering a run now through the claim, telling manual runs apart, and pruning the history by age.

-- A paused verb is not claimed for its regular occurrences; `pause` sets it on every deployment of the
-- module, and a takeover carries it to the new deployment's row.
ALTER TABLE cron_jobs
    ADD COLUMN pause_note TEXT,
    ADD COLUMN paused_at TIMESTAMPTZ,
    -- `cronverb trigger`: when set, the claim takes the row now (even when paused) and records a run
    -- scheduled at this instant with `manual = true`, then clears it.
    ADD COLUMN trigger_requested_at TIMESTAMPTZ;

ALTER TABLE cron_job_runs
    ADD COLUMN manual BOOLEAN NOT NULL DEFAULT false;

-- Retention: finished runs by age.
CREATE INDEX cron_job_runs_finished ON cron_job_runs (finished_at) WHERE finished_at IS NOT NULL;
-- `cronverb runs`: the latest runs first, of all verbs or of one.
CREATE INDEX cron_job_runs_scheduled ON cron_job_runs (scheduled_at DESC, id DESC);
CREATE INDEX cron_job_runs_verb ON cron_job_runs (verb, scheduled_at DESC, id DESC);
