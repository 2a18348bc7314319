//! The verbs and modules operators name: a verb by its full name or by its name inside its module, a
//! module by its name, read from the job rows and checked by [`lookup`].

use super::{AdminError, PgAdmin, admin_db};
use crate::admin::lookup;

/// Every verb of the job rows, as `(module, full name)`; only those of module `$1` unless it is null.
pub(super) const SELECT_VERBS: &str = "\
    SELECT DISTINCT module_name, verb FROM cron_jobs \
    WHERE $1::text IS NULL OR module_name = $1 ORDER BY module_name, verb";

/// Every module that has a deployment.
pub(super) const SELECT_MODULES: &str =
    "SELECT DISTINCT module FROM cron_deployments ORDER BY module";

impl PgAdmin {
    /// The module and full name of the verb an operator named: its full name, or its name inside its
    /// module (`send_invoices` for `billing::send_invoices`) when only one verb has it.
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
