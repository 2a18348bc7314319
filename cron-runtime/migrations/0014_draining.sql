-- A replica that shuts down gives its share of the runs up at once (docs/runtime.md, "How work is
-- spread"). Additive ("Migrations across releases"): a release that does not know the column never reads
-- or writes it; it counts a draining replica of this release live until its row is deleted, as before.
--
-- `draining`: the replica has begun to shut down and claims no more; the others leave it out of the live
-- replicas they spread the work over.
ALTER TABLE cron_runners ADD COLUMN draining BOOLEAN NOT NULL DEFAULT false;
