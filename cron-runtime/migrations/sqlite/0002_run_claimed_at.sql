-- When each run was claimed (docs/operations.md, "The tables"), in microseconds since the Unix epoch
-- like every instant of migrations/sqlite/0001_cron_tables.sql. Additive ("Migrations across
-- releases"): nullable, so that a release that does not know it still inserts runs; its runs have none.
ALTER TABLE cron_job_runs ADD COLUMN claimed_at INTEGER;
