//! The verbs and modules operators name, read from the job rows and checked by
//! [`lookup`](crate::admin::lookup).

use super::{SqliteAdmin, admin_db};
use crate::admin::{AdminError, lookup};

/// Every verb of the job rows, as `(module, full name)`; only those of module `?1` unless it is null.
const SELECT_VERBS: &str = "\
    SELECT DISTINCT module_name, verb FROM cron_jobs \
    WHERE ?1 IS NULL OR module_name = ?1 ORDER BY module_name, verb";

/// Every module that has a deployment.
const SELECT_MODULES: &str = "SELECT DISTINCT module FROM cron_deployments ORDER BY module";

impl SqliteAdmin {
    /// The module and full name of the verb an operator named: its full name, or its name inside its
    /// module when only one verb has it.
    pub(super) async fn resolve_verb(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> Result<(String, String), AdminError> {
        if let Some(module) = module {
            self.check_module(module).await?;
        }
        let known: Vec<(String, String)> = sqlx::query_as(SELECT_VERBS)
            .bind(module)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(format!("looking up verb `{verb}`")))?;
        lookup::resolve_verb(verb, module, &known)
    }

    /// Refuses a module that has no deployment.
    pub(super) async fn check_module(&self, module: &str) -> Result<(), AdminError> {
        let known: Vec<String> = sqlx::query_scalar(SELECT_MODULES)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(format!("looking up module `{module}`")))?;
        lookup::check_module(module, known)
    }
}
