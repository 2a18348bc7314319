//! The statements of `runs` on SQLite, which `crate::admin::runs` runs: the history of runs, latest
//! first, filtered by module, verb and age.

/// Whether verb `?1` has any run (of module `?2` unless it is null).
pub(super) const HAS_HISTORY: &str = "\
    SELECT EXISTS (SELECT 1 FROM cron_job_runs \
    WHERE verb = ?1 AND (?2 IS NULL OR module_name = ?2))";

/// The latest `?5` runs, as `RunRow`s: of module `?1` and verb `?2` (any when null), scheduled at or
/// after the instants `?3` and `?4` (no bound when null), and before the run `(?6 scheduled_at, ?7 id)`
/// in the history's order (from the newest when null). The cursor is always a row comparison, so that the
/// index (`cron_job_runs_verb` or `cron_job_runs_scheduled`) is read from it. A run that is `running`
/// after an attempt ended (it has attempts) looks up the job row holding its pending retry (idle,
/// `retry_run_id` its id; after a takeover, another deployment's row than `job_id`): that subquery runs
/// for those runs only.
pub(super) const SELECT_RUNS: &str = "\
    SELECT r.id, r.module_name AS module, r.verb, d.key AS deployment, r.scheduled_at, r.claimed_at, \
           r.started_at, r.finished_at, r.outcome, r.error, r.runner, r.late, r.skipped, r.manual, r.backfill, \
           r.attempts, \
           CASE WHEN r.outcome = 'running' AND r.attempts IS NOT NULL THEN \
               (SELECT j.next_execution FROM cron_jobs j \
                WHERE j.retry_run_id = r.id AND j.state = 'idle' LIMIT 1) \
           END AS retry_at \
    FROM cron_job_runs r \
    LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
    WHERE (?1 IS NULL OR r.module_name = ?1) \
      AND (?2 IS NULL OR r.verb = ?2) \
      AND (?3 IS NULL OR r.scheduled_at >= ?3) \
      AND (?4 IS NULL OR r.scheduled_at >= ?4) \
      AND (r.scheduled_at, r.id) < (coalesce(?6, 9223372036854775807), coalesce(?7, 9223372036854775807)) \
    ORDER BY r.scheduled_at DESC, r.id DESC \
    LIMIT ?5";
