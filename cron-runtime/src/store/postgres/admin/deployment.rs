//! The statements of `deployment` on PostgreSQL, which `crate::admin::deployment` runs.

/// Deployment `$1` (its key), as a `RegisteredDeployment`.
pub(super) const SELECT_DEPLOYMENT: &str = "\
    SELECT id, key, module, active, created_at, activated_at, schema::text AS schema \
    FROM cron_deployments WHERE key = $1";

/// The replicas of deployment `$1` (its id), as `ReplicaRow`s by name, each live when its last
/// heartbeat is within `$2` seconds.
pub(super) const SELECT_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, \
           last_seen >= now() - make_interval(secs => $2) AS live, \
           every_replica_runs::text AS every_replica_runs \
    FROM cron_runners WHERE deployment_id = $1 \
    ORDER BY host, pid";
