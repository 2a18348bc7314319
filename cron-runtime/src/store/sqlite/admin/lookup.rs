//! The statements of verb lookup on SQLite: the verbs and modules operators name, read from the job
//! rows and checked by `crate::admin::lookup`.

use super::SqliteAdmin;
use crate::admin::lookup::Lookup;

/// Every verb of the job rows, as `(module, full name)`; only those of module `?1` unless it is null.
const SELECT_VERBS: &str = "\
    SELECT DISTINCT module_name, verb FROM cron_jobs \
    WHERE ?1 IS NULL OR module_name = ?1 ORDER BY module_name, verb";

/// Every module that has a deployment.
const SELECT_MODULES: &str = "SELECT DISTINCT module FROM cron_deployments ORDER BY module";

impl Lookup for SqliteAdmin {
    async fn verbs(&self, module: Option<&str>) -> Result<Vec<(String, String)>, sqlx::Error> {
        sqlx::query_as(SELECT_VERBS)
            .bind(module)
            .fetch_all(&self.pool)
            .await
    }

    async fn modules(&self) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(SELECT_MODULES)
            .fetch_all(&self.pool)
            .await
    }
}
