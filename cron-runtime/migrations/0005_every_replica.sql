-- Jobs on every replica in the store (docs/runtime.md, "Jobs on every replica"; docs/operations.md, "The
-- tables"). Additive ("Migrations across releases"): a release that does not know these columns inserts
-- only jobs on one replica (the default) and runners that report nothing.
--
-- A row of a job that every replica runs itself: registered so that operators see it and can pause it,
-- never claimed (its `next_execution` stays NULL and the claim reads only rows where this is false).
ALTER TABLE cron_jobs ADD COLUMN every_replica BOOLEAN NOT NULL DEFAULT false;
-- The last run of each job on every replica on this replica, as a JSON object by verb of
-- {"scheduled_at", "finished_at", "outcome", "error"}; written with the replica's heartbeats, deleted
-- with its row at shutdown. NULL until the replica has run one.
ALTER TABLE cron_runners ADD COLUMN every_replica_runs JSONB;
