//! A store's tables as the operator commands use them: a write transaction and the errors of their
//! statements. Every command's statements (`pause::PauseTx`, ...) build on these; the store implements
//! them beside its SQL (docs/architecture.md).

use std::fmt::Debug;
use std::future::Future;

use super::AdminError;
use crate::store::StoreError;

/// A store's tables, as every operator command reads and writes them.
pub(crate) trait Tables: Debug + Send + Sync + 'static {
    /// A write transaction on the tables.
    type Write: Write;

    /// Begins a write transaction; `context` says what the command is doing, for its error.
    fn write(&self, context: &str) -> impl Future<Output = Result<Self::Write, StoreError>> + Send;

    /// The module and full name of the verb an operator named.
    fn resolve_verb(
        &self,
        verb: &str,
        module: Option<&str>,
    ) -> impl Future<Output = Result<(String, String), AdminError>> + Send;
}

/// A write transaction of [`Tables`]: what every command that writes does with it.
pub(crate) trait Write: Send {
    /// Wakes the replicas of `module` once the transaction commits, where the store does not hear
    /// commits by itself.
    fn notify(&mut self, module: &str) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Commits the transaction.
    fn commit(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// The error of a statement after a command's first: the database's, with what the command was doing.
pub(crate) fn db(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |source| StoreError::Database {
        context: context.to_owned(),
        source: Box::new(source),
    }
}
