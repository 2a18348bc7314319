-- Catch-up after downtime (docs/runtime.md, "Missed runs"; docs/operations.md, "The tables"). Additive
-- ("Migrations across releases"): a release that does not know these columns inserts rows with no window
-- and not `all`, and runs a row of this release's `missed = "all"` as `once`, the policy it knows nearest.
--
-- `catch_up`: how far back from now a late occurrence still runs (`catch_up = "1d"`, or the policy's
-- default window); an older one is skipped and counted. NULL: no bound (`once` without `catch_up`).
ALTER TABLE cron_jobs ADD COLUMN catch_up INTERVAL;
-- `catch_up_all`: `missed = "all"`, which runs every missed occurrence inside the window, oldest first, one
-- at a time. `missed` says `once` on such a row: its CHECK, kept as 0001 wrote it, knows `once` and `skip`.
ALTER TABLE cron_jobs ADD COLUMN catch_up_all BOOLEAN NOT NULL DEFAULT false;
