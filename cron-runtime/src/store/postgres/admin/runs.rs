//! `runs`: the history of runs, latest first, filtered by module, verb and age.

use super::{AdminError, PgAdmin, admin_db};
use crate::admin::lookup;
use crate::admin::{Run, RunFilter, Since};

/// Whether verb `$1` has any run (of module `$2` unless it is null).
pub(super) const HAS_HISTORY: &str = "\
    SELECT EXISTS (SELECT 1 FROM cron_job_runs \
    WHERE verb = $1 AND ($2::text IS NULL OR module_name = $2))";

/// The latest `$5` runs, as [`Run`]s: of module `$1` and verb `$2` (any when null), scheduled at or after
/// the instant `$3` or within `$4` seconds of now (no bound when null), and before the run
/// `($6 scheduled_at, $7 id)` in the history's order (from the newest when null). The cursor is always
/// a row comparison, so that even a generic plan reads the index from it (`cron_job_runs_verb` or
/// `cron_job_runs_scheduled`) instead of skipping rows. A run that is `running` after an attempt ended
/// (it has attempts) looks up the job row holding its pending retry (idle, `retry_run_id` its id;
/// after a takeover, another deployment's row than `job_id`): that subquery runs for those runs only.
pub(super) const SELECT_RUNS: &str = "\
    SELECT r.id, r.module_name AS module, r.verb, d.key AS deployment, r.scheduled_at, r.claimed_at, \
           r.started_at, r.finished_at, r.outcome, r.error, r.runner, r.late, r.skipped, r.manual, \
           coalesce(r.attempts, '[]'::jsonb) AS attempts, \
           CASE WHEN r.outcome = 'running' AND r.attempts IS NOT NULL THEN \
               (SELECT j.next_execution FROM cron_jobs j \
                WHERE j.retry_run_id = r.id AND j.state = 'idle' LIMIT 1) \
           END AS retry_at \
    FROM cron_job_runs r \
    LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
    WHERE ($1::text IS NULL OR r.module_name = $1) \
      AND ($2::text IS NULL OR r.verb = $2) \
      AND ($3::timestamptz IS NULL OR r.scheduled_at >= $3) \
      AND ($4::float8 IS NULL OR r.scheduled_at >= now() - make_interval(secs => $4)) \
      AND (r.scheduled_at, r.id) < (coalesce($6, 'infinity'::timestamptz), coalesce($7, 9223372036854775807)) \
    ORDER BY r.scheduled_at DESC, r.id DESC \
    LIMIT $5";

impl PgAdmin {
    /// [`Admin::runs`](crate::admin::Admin::runs) on PostgreSQL.
    pub(crate) async fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, AdminError> {
        let context = || "reading the history".to_owned();
        if let Some(module) = &filter.module {
            lookup::check_module(self, module).await?;
        }
        let verb = match &filter.verb {
            None => None,
            Some(verb) => {
                // A verb with history only (removed from every deployment) is still one to ask about.
                let has_history: bool = sqlx::query_scalar(HAS_HISTORY)
                    .bind(verb)
                    .bind(filter.module.as_deref())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(admin_db(context()))?;
                if has_history {
                    Some(verb.clone())
                } else {
                    Some(
                        lookup::resolve_verb(self, verb, filter.module.as_deref())
                            .await?
                            .1,
                    )
                }
            }
        };
        let (since_instant, since_secs) = match filter.since {
            None => (None, None),
            Some(Since::Instant(at)) => (Some(at), None),
            Some(Since::Ago(ago)) => (None, Some(ago.as_secs_f64())),
        };
        let runs: Vec<Run> = sqlx::query_as(SELECT_RUNS)
            .bind(filter.module.as_deref())
            .bind(verb.as_deref())
            .bind(since_instant)
            .bind(since_secs)
            .bind(i64::from(filter.limit))
            .bind(filter.before.map(|c| c.scheduled_at))
            .bind(filter.before.map(|c| c.id))
            .fetch_all(&self.pool)
            .await
            .map_err(admin_db(context()))?;
        Ok(runs.into_iter().map(Run::with_lateness).collect())
    }
}
