-- Catch-up after downtime (docs/runtime.md, "Missed runs"; docs/operations.md, "The tables"). Additive
-- ("Migrations across releases"): a release that does not know these columns inserts rows with no window
-- and not `all`, and runs a row of this release's `missed = "all"` as `once`, the policy it knows nearest.
--
-- `catch_up`: how far back from now a late occurrence still runs, in milliseconds (`catch_up = "1d"`, or
-- the policy's default window); an older one is skipped and counted. NULL: no bound.
ALTER TABLE cron_jobs ADD COLUMN catch_up INTEGER CHECK (catch_up IS NULL OR catch_up > 0);
-- `catch_up_all`: `missed = "all"`, which runs every missed occurrence inside the window, oldest first, one
-- at a time. `missed` says `once` on such a row: SQLite cannot change 0001's CHECK on it without
-- rebuilding the table.
ALTER TABLE cron_jobs ADD COLUMN catch_up_all INTEGER NOT NULL DEFAULT 0 CHECK (catch_up_all IN (0, 1));
