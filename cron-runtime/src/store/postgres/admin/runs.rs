//! The statements of `runs` on PostgreSQL, which `crate::admin::runs` runs: the history of runs, latest
//! first, filtered by module, verb and age.

use super::PgAdmin;
use crate::admin::runs::History;
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

impl History for PgAdmin {
    async fn has_history(&self, verb: &str, module: Option<&str>) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(HAS_HISTORY)
            .bind(verb)
            .bind(module)
            .fetch_one(&self.pool)
            .await
    }

    async fn latest_runs(
        &self,
        filter: &RunFilter,
        verb: Option<&str>,
    ) -> Result<Vec<Run>, sqlx::Error> {
        let (since_instant, since_secs) = match filter.since {
            None => (None, None),
            Some(Since::Instant(at)) => (Some(at), None),
            Some(Since::Ago(ago)) => (None, Some(ago.as_secs_f64())),
        };
        sqlx::query_as(SELECT_RUNS)
            .bind(filter.module.as_deref())
            .bind(verb)
            .bind(since_instant)
            .bind(since_secs)
            .bind(i64::from(filter.limit))
            .bind(filter.before.map(|c| c.scheduled_at))
            .bind(filter.before.map(|c| c.id))
            .fetch_all(&self.pool)
            .await
    }
}
