//! The verbs and modules operators name: a verb by its full name or by its name inside its module, a
//! module by its name; an unknown or ambiguous one is refused with what it may have meant.

use super::suggest::close_to;
use super::{Admin, AdminError, admin_db};

/// Every verb of the job rows, as `(module, full name)`; only those of module `$1` unless it is null.
pub(super) const SELECT_VERBS: &str = "\
    SELECT DISTINCT module_name, verb FROM cron_jobs \
    WHERE $1::text IS NULL OR module_name = $1 ORDER BY module_name, verb";

/// Every module that has a deployment.
pub(super) const SELECT_MODULES: &str =
    "SELECT DISTINCT module FROM cron_deployments ORDER BY module";

impl Admin {
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
        let exact: Vec<&(String, String)> = known.iter().filter(|(_, v)| v == verb).collect();
        let suffix = format!("::{verb}");
        let found = if exact.is_empty() {
            known.iter().filter(|(_, v)| v.ends_with(&suffix)).collect()
        } else {
            exact
        };
        match found.as_slice() {
            [(module, verb)] => Ok((module.clone(), verb.clone())),
            [] => {
                // One name per verb, however many modules have it.
                let mut names: Vec<String> = known.iter().map(|(_, v)| v.clone()).collect();
                names.sort();
                names.dedup();
                Err(AdminError::UnknownVerb {
                    verb: verb.to_owned(),
                    module: module.map(str::to_owned),
                    close: close_to(verb, &names),
                    known: names,
                })
            }
            many if many.iter().all(|(_, v)| v == verb) => Err(AdminError::VerbInSeveralModules {
                verb: verb.to_owned(),
                modules: many.iter().map(|(module, _)| module.clone()).collect(),
            }),
            many => Err(AdminError::AmbiguousVerb {
                verb: verb.to_owned(),
                candidates: many.iter().map(|&candidate| candidate.clone()).collect(),
            }),
        }
    }

    /// Refuses a module that has no deployment.
    pub(super) async fn check_module(&self, module: &str) -> Result<(), AdminError> {
        let known: Vec<String> = sqlx::query_scalar(SELECT_MODULES)
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(format!("looking up module `{module}`")))?;
        if known.iter().any(|m| m == module) {
            Ok(())
        } else {
            Err(AdminError::UnknownModule {
                module: module.to_owned(),
                known,
            })
        }
    }
}
