-- Fixed schedules (docs/operations.md, "Changing a schedule without a build"). Additive ("Migrations
-- across releases"): a release that does not know the column inserts rows that are not fixed (the
-- default), and its operator commands override any verb as before.
--
-- `fixed`: the job's code declares `#[cron(..., fixed)]`: an operator may not override its schedule.
-- `cronverb reschedule` reads it from the verb's rows, so that the CLI, which runs without the
-- application's build, refuses as the application would.
ALTER TABLE cron_jobs ADD COLUMN fixed INTEGER NOT NULL DEFAULT 0 CHECK (fixed IN (0, 1));
