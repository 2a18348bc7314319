-- A job's own lease, and how it retries, on its row (docs/runtime.md, "Leases: a frozen replica cannot
-- run on" and "Retries"). Additive ("Migrations across releases"): nullable columns, so that a release
-- that does not know them keeps working during a rolling deploy. The rows it registers have none: their
-- runs hold the runtime's lease, and one taken back from a dead replica ends `abandoned`, not retried.
--
-- `lease`: how long a claimed run stays owned without renewal (`lease = "10s"`), in milliseconds; NULL
-- for the runtime's lease (`RuntimeBuilder::lease`, 30 s by default), which a claim and a renewal then
-- use.
ALTER TABLE cron_jobs ADD COLUMN lease INTEGER CHECK (lease IS NULL OR lease > 0);
-- `retries` and `backoff` (milliseconds; `retries = 3, backoff = "30s"`, the backoff the runtime's
-- default when the job sets none): a run taken back because its replica stopped renewing its lease is a
-- failed attempt, tried again by the replica that takes it back while retries remain. NULL: none.
ALTER TABLE cron_jobs ADD COLUMN retries INTEGER CHECK (retries IS NULL OR retries >= 0);
ALTER TABLE cron_jobs ADD COLUMN backoff INTEGER CHECK (backoff IS NULL OR backoff >= 0);
