-- Cancelling a run in flight (docs/operations.md, "Cancelling a run"): `cronverb cancel VERB` asks for
-- the run that executes now to stop, on the run's own row, and wakes the replicas (`NOTIFY`); the
-- replica that runs it reads the request, its handler sees `context().cancelled()`, and the run is
-- recorded `cancelled` with the request's actor and note, never retried. Additive ("Migrations across
-- releases"): a release that does not know these columns never reads nor writes them, and its runs
-- run to their end as before.
--
-- `cancel_requested_at`: when the operator asked (the database's clock); NULL: never asked.
ALTER TABLE cron_job_runs ADD COLUMN cancel_requested_at TIMESTAMPTZ;
-- `cancel_requested_by`: who asked (the audit trail's actor).
ALTER TABLE cron_job_runs ADD COLUMN cancel_requested_by TEXT;
-- `cancel_note`: why, as the operator wrote it (`--note`).
ALTER TABLE cron_job_runs ADD COLUMN cancel_note TEXT;
