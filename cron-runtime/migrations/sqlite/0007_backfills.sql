-- Backfills by an operator (docs/operations.md, "Backfill"), instants in microseconds since the Unix
-- epoch like every instant of migrations/sqlite/0001_cron_tables.sql. Additive ("Migrations across
-- releases"): a release that does not know the queue never reads it (its replicas leave queued
-- occurrences to the replicas of a release that does) and inserts runs that are not backfills (the
-- default).
--
-- The queue: the occurrences of a verb an operator asked to run (`cronverb backfill`), by module and
-- verb rather than job row, so that a queue outlives a deploy. The claim takes a verb's earliest one as
-- a manual run of that instant, recorded with `backfill = 1`, and deletes it in the same transaction;
-- `cronverb backfill --cancel` deletes the rest. Empty unless an operator backfills.
CREATE TABLE cron_backfills (
    module_name  TEXT NOT NULL,
    verb         TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    requested_at INTEGER NOT NULL,
    PRIMARY KEY (module_name, verb, scheduled_at)
) WITHOUT ROWID;

-- A run of a backfilled occurrence (it is `manual` too: it left the regular schedule alone).
ALTER TABLE cron_job_runs ADD COLUMN backfill INTEGER NOT NULL DEFAULT 0 CHECK (backfill IN (0, 1));
