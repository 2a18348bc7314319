-- Jitter (docs/runtime.md, "Jitter"; docs/operations.md, "The tables"). Additive ("Migrations across
-- releases"): a release that does not know these columns inserts rows with no jitter (offset 0), and
-- starts a row of this release's jittered job at its instant, as it would without jitter; the run it
-- records is the same occurrence (`scheduled_at` stays the instant), so no occurrence runs twice.
--
-- `jitter`: the job's jitter as declared (`jitter = "10m"`), for the operator's view; NULL: none.
ALTER TABLE cron_jobs ADD COLUMN jitter INTERVAL;
-- `jitter_offset_ms`: the job's fixed offset in `[0, jitter)`, in milliseconds, which the claim adds to a
-- regular occurrence's `next_execution` to find when it starts (not to a retry's instant). 0: none.
ALTER TABLE cron_jobs ADD COLUMN jitter_offset_ms BIGINT NOT NULL DEFAULT 0
    CHECK (jitter_offset_ms >= 0);
