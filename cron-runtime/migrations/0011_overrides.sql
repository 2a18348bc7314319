-- Schedule overrides (docs/operations.md, "Changing a schedule without a build"). Additive ("Migrations
-- across releases"): a release that does not know them runs each row's `schedule` as it always has (a
-- row whose text differs from its build is reported and wins, G8), so an override applied while it
-- runs is obeyed; only a new deployment that it registers starts at its code's schedule.
--
-- One override per verb of a module, whatever the deployment: a new deployment's rows of the verb
-- start at it (it wins over the code's expression until `cronverb reschedule VERB --reset`).
CREATE TABLE cron_overrides (
    module_name TEXT NOT NULL,
    verb        TEXT NOT NULL,
    -- The expression and IANA zone that run instead of the code's.
    schedule    TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    -- Who set it (the audit trail's actor) and when, by the database's clock, with their note.
    actor       TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    note        TEXT,
    PRIMARY KEY (module_name, verb)
);

-- A replica's registration reads it, also one whose role was granted only the tables before this
-- migration (docs/operations.md, "Setting up"); the operator commands write it.
GRANT SELECT ON cron_overrides TO PUBLIC;

-- On a job row whose `schedule` and `timezone` are an override's: the code's expression and zone, as
-- its deployment declared them, for the drift `cronverb status` shows and for `--reset`. NULL: the row
-- runs its code's schedule.
ALTER TABLE cron_jobs ADD COLUMN code_schedule TEXT;
ALTER TABLE cron_jobs ADD COLUMN code_timezone TEXT;
