//! Every statement of the operator API, written once for both SQL databases: [`statements!`] builds a
//! [`Statements`](super::sql::Statements) from the few fragments each database spells its own way, and
//! each store's [`Dialect`](super::sql::Dialect) invokes it with its spelling. What each statement
//! binds and reads is documented on its field of `Statements`.
//!
//! Both drivers take parameters written `$1`, `$2`, … (sqlx's SQLite driver binds `$N` as the `N`th
//! argument). A parameter that may be null is compared with a column before it is tested for null
//! (`module_name = $1 OR $1 IS NULL`), so that PostgreSQL infers its type from its first use; the
//! JSON columns read as text with `CAST`, which both databases take. What remains is the fragments:
//!
//! - `lock`, `lock_jobs`: how a statement locks the rows it decides on (`FOR UPDATE`, `FOR UPDATE OF
//!   j`); SQLite's write transaction holds the whole file, so it writes nothing.
//! - `since_1`, `since_2`, `since_4`: the instant a span back from now ([`Ago`](super::rows::Ago))
//!   stands for, parameter `N` being the span: PostgreSQL binds seconds and subtracts them from its
//!   `now()`, SQLite binds the instant its store's clock gives less the span.
//! - `among_ids_1`: membership in the list of ids `$1` ([`Ids`](super::rows::Ids)): an `int8[]` on
//!   PostgreSQL, a JSON array on SQLite.
//! - `last_instant`: an instant after every other, for the history's cursor.
//! - `catch_up_ms`: a job row's catch-up window (`j.catch_up`) in milliseconds: PostgreSQL keeps an
//!   `interval`, SQLite the milliseconds themselves.
//! - `jitter_ms`: a job row's jitter (`cron_jobs.jitter`, migration 0008) in milliseconds: an
//!   `interval` on PostgreSQL, milliseconds already on SQLite.

/// The operator API's [`Statements`](super::sql::Statements), spelled for one database
/// (docs/architecture.md, "One protocol, three stores").
macro_rules! statements {
    (
        lock: $lock:literal,
        lock_jobs: $lock_jobs:literal,
        since_1: $since_1:literal,
        since_2: $since_2:literal,
        since_4: $since_4:literal,
        among_ids_1: $among_ids_1:literal,
        last_instant: $last_instant:literal,
        catch_up_ms: $catch_up_ms:literal,
        jitter_ms: $jitter_ms:literal $(,)?
    ) => {
        $crate::admin::sql::Statements {
            verbs: "SELECT DISTINCT module_name, verb FROM cron_jobs \
                WHERE module_name = $1 OR $1 IS NULL ORDER BY module_name, verb",
            modules: "SELECT DISTINCT module FROM cron_deployments ORDER BY module",
            module_of_key: "SELECT module FROM cron_deployments WHERE key = $1",
            deployed_jobs: "SELECT verb, schedule, timezone, next_execution, code_schedule, \
                    code_timezone FROM cron_jobs \
                WHERE deployment_id = $1 ORDER BY verb",
            active_schema: "SELECT key, CAST(schema AS text) AS schema FROM cron_deployments \
                WHERE module = $1 AND active",
            deployment: "SELECT id, key, module, active, created_at, activated_at, \
                    CAST(schema AS text) AS schema \
                FROM cron_deployments WHERE key = $1",
            replicas: concat!(
                "SELECT deployment_id, host, pid, started_at, last_seen, last_seen >= ",
                $since_2,
                " AS live, CAST(every_replica_runs AS text) AS every_replica_runs \
                FROM cron_runners WHERE deployment_id = $1 \
                ORDER BY host, pid"
            ),
            has_history: "SELECT EXISTS (SELECT 1 FROM cron_job_runs \
                WHERE verb = $1 AND (module_name = $2 OR $2 IS NULL))",
            // The cursor is always a row comparison, so that even a generic plan reads the index from
            // it (`cron_job_runs_verb` or `cron_job_runs_scheduled`) instead of skipping rows; the
            // subquery for a pending retry's instant runs for the runs that have one only.
            runs: concat!(
                "SELECT r.id, r.module_name AS module, r.verb, d.key AS deployment, r.scheduled_at, \
                    r.claimed_at, r.started_at, r.finished_at, r.outcome, r.error, r.runner, r.late, \
                    r.skipped, r.manual, r.backfill, CAST(r.attempts AS text) AS attempts, \
                    CASE WHEN r.outcome = 'running' AND r.attempts IS NOT NULL THEN \
                        (SELECT j.next_execution FROM cron_jobs j \
                         WHERE j.retry_run_id = r.id AND j.state = 'idle' LIMIT 1) \
                    END AS retry_at \
                FROM cron_job_runs r \
                LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
                WHERE (r.module_name = $1 OR $1 IS NULL) \
                  AND (r.verb = $2 OR $2 IS NULL) \
                  AND (r.scheduled_at >= $3 OR $3 IS NULL) \
                  AND (r.scheduled_at >= ",
                $since_4,
                " OR $4 IS NULL) \
                  AND (r.scheduled_at, r.id) < (coalesce($6, ",
                $last_instant,
                "), coalesce($7, 9223372036854775807)) \
                ORDER BY r.scheduled_at DESC, r.id DESC \
                LIMIT $5"
            ),
            prune: concat!(
                "DELETE FROM cron_job_runs WHERE id IN ( \
                    SELECT o.id FROM cron_job_runs o \
                    WHERE o.scheduled_at < ",
                $since_1,
                " AND o.finished_at < ",
                $since_1,
                " AND o.outcome <> 'running' \
                      AND NOT (o.outcome = 'succeeded' AND NOT EXISTS ( \
                          SELECT 1 FROM cron_job_runs n \
                          WHERE n.module_name = o.module_name AND n.verb = o.verb \
                            AND n.scheduled_at > o.scheduled_at AND n.outcome = 'succeeded')) \
                    ORDER BY o.scheduled_at \
                    LIMIT $2)"
            ),
            deployments: concat!(
                "WITH ranked AS ( \
                    SELECT d.id, d.key, d.module, d.active, d.created_at, d.activated_at, \
                        (SELECT count(*) FROM cron_runners r \
                         WHERE r.deployment_id = d.id AND r.last_seen >= ",
                $since_2,
                ") AS live_replicas, \
                        row_number() OVER (PARTITION BY d.module ORDER BY d.created_at DESC, d.id DESC) \
                            AS recency \
                    FROM cron_deployments d \
                    WHERE d.module = $1 OR $1 IS NULL \
                ) \
                SELECT id, key, module, active, created_at, activated_at, live_replicas FROM ranked \
                WHERE active OR live_replicas > 0 OR recency <= $3 \
                ORDER BY module, created_at DESC, id DESC"
            ),
            jobs: concat!(
                "SELECT j.module_name, j.verb, d.key, d.active, j.every_replica, j.fixed, j.schedule, \
                    j.timezone, CASE WHEN j.catch_up_all THEN 'all' ELSE j.missed END AS missed, ",
                $catch_up_ms,
                " AS catch_up_ms, j.state, j.paused, j.pause_note, j.paused_at, \
                    j.next_execution, j.trigger_requested_at, j.current_run_id, j.lease_expires_at, \
                    j.retry_run_id IS NOT NULL AS retry_pending, ",
                $jitter_ms,
                " AS jitter_ms, j.jitter_offset_ms, \
                    c.runner AS current_runner, c.started_at AS current_started_at, \
                    l.id AS run_id, l.scheduled_at, l.started_at, l.finished_at, l.outcome, l.error, \
                    l.manual, j.overdue_notified_for, \
                    NOT EXISTS (SELECT 1 FROM cron_job_runs s \
                        WHERE s.module_name = j.module_name AND s.verb = j.verb \
                        AND s.scheduled_at >= j.overdue_notified_for AND s.outcome = 'succeeded') \
                        AS overdue_unanswered, \
                    j.code_schedule, j.code_timezone, o.actor AS override_actor, \
                    o.at AS override_at, o.note AS override_note \
                FROM cron_jobs j \
                JOIN cron_deployments d ON d.id = j.deployment_id \
                LEFT JOIN cron_overrides o ON o.module_name = j.module_name AND o.verb = j.verb \
                LEFT JOIN cron_job_runs c ON c.id = j.current_run_id \
                LEFT JOIN cron_job_runs l ON l.id = ( \
                    SELECT r.id FROM cron_job_runs r \
                    WHERE r.module_name = j.module_name AND r.verb = j.verb \
                    ORDER BY r.scheduled_at DESC, r.id DESC \
                    LIMIT 1) \
                WHERE j.deployment_id ",
                $among_ids_1,
                " ORDER BY j.module_name, j.verb"
            ),
            live_replicas: concat!(
                "SELECT deployment_id, host, pid, started_at, last_seen, true AS live, \
                    CAST(every_replica_runs AS text) AS every_replica_runs FROM cron_runners \
                WHERE deployment_id ",
                $among_ids_1,
                " AND last_seen >= ",
                $since_2,
                " ORDER BY deployment_id, host, pid"
            ),
            lock_paused: concat!(
                "SELECT j.paused FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
                WHERE j.module_name = $1 AND j.verb = $2 ORDER BY d.active, j.id",
                $lock_jobs
            ),
            pause: "UPDATE cron_jobs \
                SET paused = true, \
                    pause_note = CASE WHEN paused THEN coalesce($3, pause_note) ELSE $3 END, \
                    paused_at = CASE WHEN paused THEN paused_at ELSE $4 END \
                WHERE module_name = $1 AND verb = $2",
            lock_for_resume: concat!(
                "SELECT j.id, j.schedule, j.timezone, j.state, j.paused, j.next_execution, \
                    j.retry_run_id, j.every_replica, j.jitter_offset_ms, \
                    r.scheduled_at AS retry_of, CAST(r.attempts AS text) AS retry_attempts \
                FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
                LEFT JOIN cron_job_runs r ON r.id = j.retry_run_id \
                WHERE j.module_name = $1 AND j.verb = $2 ORDER BY d.active, j.id",
                $lock_jobs
            ),
            resume: "UPDATE cron_jobs \
                SET paused = false, pause_note = NULL, paused_at = NULL, next_execution = $2, \
                    retry_run_id = $3, overdue_notified_for = coalesce($4, overdue_notified_for) \
                WHERE id = $1",
            cut_short: "UPDATE cron_job_runs \
                SET outcome = 'failed', error = $2, finished_at = $3, \
                    started_at = coalesce($4, started_at) \
                WHERE id = $1 AND outcome = 'running'",
            pause_state: "SELECT j.state, j.paused, j.pause_note, j.paused_at, j.next_execution, \
                    d.active \
                FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
                WHERE j.module_name = $1 AND j.verb = $2 \
                ORDER BY d.active DESC, d.created_at DESC, d.id DESC",
            active_deployment: concat!(
                "SELECT id, key, \
                    (SELECT count(*) FROM cron_runners r \
                     WHERE r.deployment_id = d.id AND r.last_seen >= ",
                $since_2,
                ") AS live_replicas \
                FROM cron_deployments d WHERE module = $1 AND active"
            ),
            lock_trigger_row: concat!(
                "SELECT id, trigger_requested_at, every_replica FROM cron_jobs \
                WHERE deployment_id = $1 AND verb = $2",
                $lock
            ),
            executing: "SELECT j.current_run_id, r.started_at, coalesce(r.manual, false) AS manual, \
                    coalesce(r.attempts IS NOT NULL, false) AS retry \
                FROM cron_jobs j LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
                WHERE j.module_name = $1 AND j.verb = $2 AND j.state = 'executing' \
                ORDER BY j.id",
            request_trigger: "UPDATE cron_jobs SET trigger_requested_at = $2 WHERE id = $1",
            request_cancel: "UPDATE cron_job_runs \
                SET cancel_requested_at = $2, cancel_requested_by = $3, cancel_note = $4 \
                WHERE id = $1 AND outcome = 'running' AND cancel_requested_by IS NULL",
            cancel_of: "SELECT outcome, cancel_requested_at, cancel_requested_by, cancel_note \
                FROM cron_job_runs WHERE id = $1",
            cancel_retry: "UPDATE cron_job_runs \
                SET outcome = 'cancelled', error = $2, finished_at = $3, \
                    started_at = coalesce($4, started_at), \
                    cancel_requested_at = $3, cancel_requested_by = $5, cancel_note = $6 \
                WHERE id = $1 AND outcome = 'running'",
            retry_cancelled: "UPDATE cron_jobs SET retry_run_id = NULL, next_execution = $2 \
                WHERE id = $1",
            lock_for_reschedule: concat!(
                "SELECT j.id, j.schedule, j.timezone, j.code_schedule, j.code_timezone, j.state, \
                    j.next_execution, j.retry_run_id IS NOT NULL AS retry_pending, j.every_replica, j.fixed, ",
                $jitter_ms,
                " AS jitter_ms, d.active \
                FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
                WHERE j.module_name = $1 AND j.verb = $2 ORDER BY d.active, j.id",
                $lock_jobs
            ),
            set_override: "INSERT INTO cron_overrides \
                    (module_name, verb, schedule, timezone, actor, at, note) \
                VALUES ($1, $2, $3, $4, $5, $6, $7) \
                ON CONFLICT (module_name, verb) DO UPDATE \
                SET schedule = excluded.schedule, timezone = excluded.timezone, \
                    actor = excluded.actor, at = excluded.at, note = excluded.note",
        }
    };
}
pub(crate) use statements;

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use sqlx::{Postgres, Sqlite};

    use crate::admin::sql::Dialect;

    /// No statement repeats another on either database: two commands that read the same thing run one
    /// statement.
    #[test]
    fn each_statement_is_written_once() {
        for named in [Postgres::SQL.named(), Sqlite::SQL.named()] {
            let mut texts = HashSet::new();
            for (name, sql) in named {
                assert!(texts.insert(sql), "{name} repeats another statement");
            }
        }
    }
}
