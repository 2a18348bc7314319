//! The statements of `pause`, `resume` and `trigger` on PostgreSQL, which `crate::admin::pause` runs:
//! each locks the rows it decides on (`FOR UPDATE`), and binds the transaction's instant (its `now()`).

/// Locks the rows of verb `$2` of module `$1` (one per deployment that has it) and reads whether each is
/// paused.
pub(super) const LOCK_PAUSED: &str = "\
    SELECT paused FROM cron_jobs WHERE module_name = $1 AND verb = $2 ORDER BY id FOR UPDATE";

/// Pauses the rows of verb `$2` of module `$1` with the note `$3` at the instant `$4`: a row already
/// paused keeps its instant, and its note unless `$3` is given.
pub(super) const PAUSE: &str = "\
    UPDATE cron_jobs \
    SET paused = true, \
        pause_note = CASE WHEN paused THEN coalesce($3, pause_note) ELSE $3 END, \
        paused_at = CASE WHEN paused THEN paused_at ELSE $4 END \
    WHERE module_name = $1 AND verb = $2";

/// Locks the rows of verb `$2` of module `$1`, as `ResumeRow`s, each with the run whose retry it holds.
pub(super) const LOCK_FOR_RESUME: &str = "\
    SELECT j.id, j.schedule, j.timezone, j.state, j.paused, j.next_execution, j.retry_run_id, \
           r.scheduled_at AS retry_of, r.attempts::text AS retry_attempts \
    FROM cron_jobs j LEFT JOIN cron_job_runs r ON r.id = j.retry_run_id \
    WHERE j.module_name = $1 AND j.verb = $2 ORDER BY j.id FOR UPDATE OF j";

/// Resumes row `$1`, whose next occurrence is `$2` and whose pending retry is the run `$3`.
pub(super) const RESUME: &str = "\
    UPDATE cron_jobs \
    SET paused = false, pause_note = NULL, paused_at = NULL, next_execution = $2, retry_run_id = $3 \
    WHERE id = $1";

/// Ends run `$1`, whose retry was pending, `failed` with the error `$2` at the instant `$3`, started at
/// `$4` (its first attempt's start) when given.
pub(super) const CUT_SHORT: &str = "\
    UPDATE cron_job_runs \
    SET outcome = 'failed', error = $2, finished_at = $3, started_at = coalesce($4, started_at) \
    WHERE id = $1 AND outcome = 'running'";

/// The pause of verb `$2` of module `$1`, as `PauseRow`s: the active deployment's row first, then the
/// newest.
pub(super) const SELECT_PAUSE: &str = "\
    SELECT j.state, j.paused, j.pause_note, j.paused_at, j.next_execution, d.active \
    FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
    WHERE j.module_name = $1 AND j.verb = $2 \
    ORDER BY d.active DESC, d.created_at DESC, d.id DESC";

/// Module `$1`'s active deployment, as an `ActiveDeployment` whose live replicas are those seen within
/// `$2` seconds.
pub(super) const SELECT_ACTIVE_DEPLOYMENT: &str = concat!(
    "SELECT id, key, ",
    live_replicas!(),
    " AS live_replicas FROM cron_deployments d WHERE module = $1 AND active"
);

/// Locks the row of verb `$2` in deployment `$1`, as a `TriggerRow`.
pub(super) const LOCK_TRIGGER_ROW: &str = "\
    SELECT id, trigger_requested_at FROM cron_jobs \
    WHERE deployment_id = $1 AND verb = $2 FOR UPDATE";

/// A run of verb `$2` of module `$1` that refuses a trigger at the instant `$3`, as an `ExecutingRow`: the run of an
/// executing row, unless it is a regular run claimed ahead that has not started.
pub(super) const SELECT_EXECUTING: &str = "\
    SELECT j.current_run_id, r.started_at FROM cron_jobs j \
    LEFT JOIN cron_job_runs r ON r.id = j.current_run_id \
    WHERE j.module_name = $1 AND j.verb = $2 AND j.state = 'executing' \
      AND (r.id IS NULL OR r.manual OR r.started_at IS NULL OR r.started_at <= $3) \
    LIMIT 1";

/// Marks row `$1` triggered at the instant `$2`.
pub(super) const REQUEST_TRIGGER: &str =
    "UPDATE cron_jobs SET trigger_requested_at = $2 WHERE id = $1";
