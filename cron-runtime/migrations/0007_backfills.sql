-- Backfills by an operator (docs/operations.md, "Backfill"). Additive ("Migrations across releases"):
-- a release that does not know the queue never reads it (its replicas leave queued occurrences to the
-- replicas of a release that does) and inserts runs that are not backfills (the default).
--
-- The queue: the occurrences of a verb an operator asked to run (`cronverb backfill`), by module and
-- verb rather than job row, so that a queue outlives a deploy. The claim takes a verb's earliest one as
-- a manual run of that instant, recorded with `backfill = true`, and deletes it in the same
-- transaction; `cronverb backfill --cancel` deletes the rest. Empty unless an operator backfills.
CREATE TABLE cron_backfills (
    module_name  TEXT NOT NULL,
    verb         TEXT NOT NULL,
    scheduled_at TIMESTAMPTZ NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (module_name, verb, scheduled_at)
);

-- A run of a backfilled occurrence (it is `manual` too: it left the regular schedule alone).
ALTER TABLE cron_job_runs ADD COLUMN backfill BOOLEAN NOT NULL DEFAULT false;
