//! `cron_runners`: the live replicas, by heartbeat.

statements! { "runners";
    /// Registers a replica of deployment `$1` on host `$2` with process id `$3`; returns its id.
    INSERT_RUNNER = "INSERT INTO cron_runners (deployment_id, host, pid) VALUES ($1, $2, $3) RETURNING id";

    /// A heartbeat of runner `$1`. An upsert: a replica that was frozen long enough for its row to be
    /// forgotten comes back with the same id.
    HEARTBEAT = "INSERT INTO cron_runners (id, deployment_id, host, pid) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET last_seen = now()";

    /// Forgets the replicas not seen for `$1` seconds.
    FORGET_RUNNERS = "DELETE FROM cron_runners WHERE last_seen < now() - make_interval(secs => $1)";

    /// The live replicas of deployment `$1`, seen within the last `$2` seconds (the lease) and not
    /// draining, by id: each replica's place among them spreads the work (`rules::Spread`;
    /// docs/runtime.md, "How work is spread").
    LIVE_RUNNERS = "SELECT id FROM cron_runners
WHERE deployment_id = $1 AND last_seen >= now() - make_interval(secs => $2) AND NOT draining
ORDER BY id";

    /// Runner `$1` has begun to shut down (migration 0014): the others count it out of the live
    /// replicas at once.
    DRAIN_RUNNER = "UPDATE cron_runners SET draining = true WHERE id = $1";

    /// Removes runner `$1` (shutdown).
    DELETE_RUNNER = "DELETE FROM cron_runners WHERE id = $1";

    /// Writes runner `$1`'s last run of each of its jobs on every replica, the JSON array `$2`
    /// (docs/runtime.md, "Jobs on every replica").
    RECORD_REPLICA_RUNS = "UPDATE cron_runners SET every_replica_runs = $2::jsonb WHERE id = $1";

    /// The verbs of deployment `$1`'s jobs on every replica that are paused.
    PAUSED_ON_EVERY_REPLICA = "SELECT verb FROM cron_jobs
WHERE deployment_id = $1 AND every_replica AND paused ORDER BY verb";
}
