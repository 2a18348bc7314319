//! The statements of verb lookup on PostgreSQL: the verbs and modules operators name, read from the job
//! rows and checked by `crate::admin::lookup`.

/// Every verb of the job rows, as `(module, full name)`; only those of module `$1` unless it is null.
pub(super) const SELECT_VERBS: &str = "\
    SELECT DISTINCT module_name, verb FROM cron_jobs \
    WHERE $1::text IS NULL OR module_name = $1 ORDER BY module_name, verb";

/// Every module that has a deployment.
pub(super) const SELECT_MODULES: &str =
    "SELECT DISTINCT module FROM cron_deployments ORDER BY module";
