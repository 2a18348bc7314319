-- Overdue (docs/operations.md, "Overdue"). Additive ("Migrations across releases"): a release that does
-- not know the column never reads or writes it; its replicas report nothing overdue, and this release's
-- replicas report each overdue occurrence once, whichever release runs the job.
--
-- `overdue_notified_for`: the occurrence of the job last reported overdue (a job declared
-- `expect_within = "15m"` whose occurrence has not succeeded that long after its instant), in
-- microseconds since the epoch as every instant here. One replica sets it with a conditional UPDATE
-- under `BEGIN IMMEDIATE`'s one writer, and that replica alone raises the event; NULL: none reported.
ALTER TABLE cron_jobs ADD COLUMN overdue_notified_for INTEGER;
