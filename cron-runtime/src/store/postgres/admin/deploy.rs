//! The statements of `deploy` on PostgreSQL, which `crate::admin::deploy` runs: the deployment and its
//! job rows are inserted as a replica's registration inserts them.

/// The module deployment `$1` is registered for.
pub(super) const SELECT_MODULE_OF_KEY: &str = "SELECT module FROM cron_deployments WHERE key = $1";

/// The job rows of deployment `$1`, as [`RegisteredJob`]s.
pub(super) const SELECT_DEPLOYED_JOBS: &str = "\
    SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
    WHERE deployment_id = $1 ORDER BY verb";

/// The key and registered schema of module `$1`'s active deployment, as an [`ActiveSchema`].
pub(super) const SELECT_ACTIVE_SCHEMA: &str =
    "SELECT key, schema::text AS schema FROM cron_deployments WHERE module = $1 AND active";
