//! The verbs and modules operators name: a verb by its full name or by its name inside its module, a
//! module by its name; an unknown or ambiguous one is refused with what it may have meant. Every store
//! reads the names (`Statements::verbs`, `Statements::modules`) and the rules here refuse them, so that each store refuses the same
//! names with the same message.

use super::AdminError;
use super::sql::{Dialect, SqlAdmin, Statement, unmigrated};
use crate::store::rules::operator::close_to;

/// The module and full name of the verb an operator named: its full name, or its name inside its
/// module (`send_invoices` for `billing::send_invoices`) when only one verb has it. `module`, when
/// given, must have a deployment.
pub(crate) async fn resolve_verb<D: Dialect>(
    admin: &SqlAdmin<D>,
    verb: &str,
    module: Option<&str>,
) -> Result<(String, String), AdminError> {
    if let Some(module) = module {
        check_module(admin, module).await?;
    }
    let context = format!("looking up verb `{verb}`");
    let mut conn = admin.read(&context).await?;
    let known = Statement::<D>::new(D::SQL.verbs)
        .bind(module.map(str::to_owned))
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(&context))?;
    resolve(verb, module, &known)
}

/// Refuses a module that has no deployment.
pub(crate) async fn check_module<D: Dialect>(
    admin: &SqlAdmin<D>,
    module: &str,
) -> Result<(), AdminError> {
    let context = format!("looking up module `{module}`");
    let mut conn = admin.read(&context).await?;
    let known: Vec<(String,)> = Statement::<D>::new(D::SQL.modules)
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(&context))?;
    known_module(module, known.into_iter().map(|(m,)| m).collect())
}

/// The module and full name of the verb an operator named, among the `known` verbs (as `(module, full
/// name)`, of `module` alone when one was given): its full name, or its name inside its module
/// (`send_invoices` for `billing::send_invoices`) when only one verb has it.
fn resolve(
    verb: &str,
    module: Option<&str>,
    known: &[(String, String)],
) -> Result<(String, String), AdminError> {
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

/// Refuses `module` unless it is one of the `known` modules (those that have a deployment).
fn known_module(module: &str, known: Vec<String>) -> Result<(), AdminError> {
    if known.iter().any(|m| m == module) {
        Ok(())
    } else {
        Err(AdminError::UnknownModule {
            module: module.to_owned(),
            known,
        })
    }
}
