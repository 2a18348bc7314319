//! The statements of `status` on PostgreSQL, which `crate::admin::status` runs: the modules, their
//! deployments (active, live replicas) and the jobs of the deployment each module runs.

/// The deployments `status` lists, as `ListedDeployment`s, by module and newest first: of module `$1`
/// (every module when null), those that are active or have a replica alive within `$2` seconds, and the
/// `$3` most recent others.
pub(super) const SELECT_DEPLOYMENTS: &str = concat!(
    "WITH ranked AS ( \
         SELECT d.id, d.key, d.module, d.active, d.created_at, d.activated_at, ",
    live_replicas!(),
    " AS live_replicas, \
             row_number() OVER (PARTITION BY d.module ORDER BY d.created_at DESC, d.id DESC) \
                 AS recency \
         FROM cron_deployments d \
         WHERE $1::text IS NULL OR d.module = $1 \
     ) \
     SELECT id, key, module, active, created_at, activated_at, live_replicas FROM ranked \
     WHERE active OR live_replicas > 0 OR recency <= $3 \
     ORDER BY module, created_at DESC, id DESC"
);

/// The job rows of the deployments `$1` (ids), as `JobRow`s by module and verb, each with the latest
/// run of its verb under any deployment of its module.
pub(super) const SELECT_JOBS: &str = "\
    SELECT j.module_name, j.verb, d.key, d.active, j.every_replica, j.schedule, j.timezone, \
           CASE WHEN j.catch_up_all THEN 'all' ELSE j.missed END AS missed, j.state, \
           j.paused, j.pause_note, j.paused_at, j.next_execution, j.trigger_requested_at, \
           j.current_run_id, j.lease_expires_at, c.runner AS current_runner, \
           c.started_at AS current_started_at, \
           l.id AS run_id, l.scheduled_at, l.started_at, l.finished_at, l.outcome, l.error, l.manual \
    FROM cron_jobs j \
    JOIN cron_deployments d ON d.id = j.deployment_id \
    LEFT JOIN cron_job_runs c ON c.id = j.current_run_id \
    LEFT JOIN LATERAL ( \
        SELECT r.id, r.scheduled_at, r.started_at, r.finished_at, r.outcome, r.error, r.manual \
        FROM cron_job_runs r \
        WHERE r.module_name = j.module_name AND r.verb = j.verb \
        ORDER BY r.scheduled_at DESC, r.id DESC \
        LIMIT 1 \
    ) l ON true \
    WHERE j.deployment_id = ANY($1) \
    ORDER BY j.module_name, j.verb";

/// The live replicas of the deployments `$1` (ids), as `ReplicaRow`s by deployment and name: those
/// whose last heartbeat is within `$2` seconds.
pub(super) const SELECT_LIVE_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, true AS live, \
           every_replica_runs::text AS every_replica_runs FROM cron_runners \
    WHERE deployment_id = ANY($1) AND last_seen >= now() - make_interval(secs => $2) \
    ORDER BY deployment_id, host, pid";
