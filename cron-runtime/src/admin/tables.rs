//! A store's tables as the operator commands use them: a write transaction and the errors of their
//! statements. Every command's statements (`pause::PauseTx`, ...) build on these; the store implements
//! them beside its SQL (docs/architecture.md).

use std::fmt::Debug;
use std::future::Future;

use crate::store::StoreError;

/// A store's tables, as every operator command reads and writes them.
pub(crate) trait Tables: Debug + Send + Sync + 'static {
    /// A write transaction on the tables.
    type Write: Write;

    /// Begins a write transaction; `context` says what the command is doing, for its error.
    fn write(&self, context: &str) -> impl Future<Output = Result<Self::Write, StoreError>> + Send;

    /// The error of a read, `context` saying what the command was doing: a command's first statement is
    /// where a database without cronverb's tables shows, and then the error says to run `cronverb
    /// migrate`.
    fn unmigrated(context: &str, error: sqlx::Error) -> StoreError;
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

/// The error of a read of [`Tables`] `T` (a command's first statement, where missing tables show), with
/// what the command was doing.
pub(crate) fn read<T: Tables>(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |source| T::unmigrated(context, source)
}
