//! The statements of `deploy` on SQLite, which `crate::admin::deploy` runs: the deployment and its job
//! rows are inserted by the one insert a replica's registration uses (`Dialect::register`, in
//! `super`).

/// The module deployment `?1` is registered for.
pub(super) const SELECT_MODULE_OF_KEY: &str = "SELECT module FROM cron_deployments WHERE key = ?1";

/// The job rows of deployment `?1`, as `RegisteredJob`s.
pub(super) const SELECT_DEPLOYED_JOBS: &str = "\
    SELECT verb, schedule, timezone, next_execution FROM cron_jobs \
    WHERE deployment_id = ?1 ORDER BY verb";

/// Whether deployment `?1` is its module's active one.
pub(super) const SELECT_ACTIVE: &str = "SELECT active FROM cron_deployments WHERE id = ?1";

/// The key and registered schema of module `?1`'s active deployment, as an `ActiveSchema`.
pub(super) const SELECT_ACTIVE_SCHEMA: &str =
    "SELECT key, schema FROM cron_deployments WHERE module = ?1 AND active = 1";
