//! [`Store::previous_success`](crate::store::Store::previous_success) on every SQL store: the one read of
//! the run history a handler may ask for (docs/runtime.md, "What a handler knows"), written once for
//! both databases (sqlx's SQLite driver reads `$N` parameters as PostgreSQL's does, and an instant binds
//! and reads as each driver's `At`). It runs only when a handler asks, outside any transaction: no step
//! of the store's protocol reads it.

use chrono::{DateTime, Utc};

use super::run::Statement;
use super::values::At;
use super::{Protocol, SqlStore, db};
use crate::store::StoreError;

/// The scheduled instant of the latest run of verb `$2` of module `$1`, under any deployment, that
/// succeeded and is scheduled strictly before `$3`, as an `(At,)`; no row when there is none.
///
/// It walks the history's unique key (`module_name, verb, scheduled_at`) backwards from `$3` and stops
/// at the first run that succeeded: it reads as many rows as the verb has runs that did not succeed
/// since its last success (none, when the last one did). No index on `outcome`: one would be written
/// by every run's end, which changes it, and would cost the hot path what this read, which only
/// handlers that ask make, saves.
pub(crate) const PREVIOUS_SUCCESS: &str = "
SELECT scheduled_at FROM cron_job_runs
WHERE module_name = $1 AND verb = $2 AND scheduled_at < $3 AND outcome = 'succeeded'
ORDER BY scheduled_at DESC
LIMIT 1
";

impl<D: Protocol> SqlStore<D> {
    /// [`Store::previous_success`](crate::store::Store::previous_success).
    pub(super) async fn last_success_before(
        &self,
        module: &str,
        verb: &str,
        before: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let context = || format!("reading the last success of `{verb}` before {before}");
        let mut conn = self.pool.acquire().await.map_err(db(context()))?;
        let last: Option<(At,)> = Statement::<D>::new(PREVIOUS_SUCCESS)
            .bind(module.to_owned())
            .bind(verb.to_owned())
            .bind(At(before))
            .fetch_optional(&mut *conn)
            .await
            .map_err(db(context()))?;
        Ok(last.map(|(At(at),)| at))
    }
}
