//! The statements of `deployment` on SQLite, which `crate::admin::deployment` runs.

/// Deployment `?1` (its key), as a `RegisteredDeployment`.
pub(super) const SELECT_DEPLOYMENT: &str = "\
    SELECT id, key, module, active, created_at, activated_at, schema \
    FROM cron_deployments WHERE key = ?1";

/// The replicas of deployment `?1` (its id), as `ReplicaRow`s by name, each live when its last heartbeat
/// is at or after the instant `?2`.
pub(super) const SELECT_REPLICAS: &str = "\
    SELECT deployment_id, host, pid, started_at, last_seen, last_seen >= ?2 AS live, \
           every_replica_runs \
    FROM cron_runners WHERE deployment_id = ?1 \
    ORDER BY host, pid";
