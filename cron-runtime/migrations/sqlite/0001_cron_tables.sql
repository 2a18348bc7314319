-- cronverb's tables in SQLite (docs/operations.md, "The tables"; docs/runtime.md, "Which store"). The same
-- tables, columns and meaning as migrations/0001_cron_tables.sql (PostgreSQL), in SQLite's types:
--
-- - an instant is an INTEGER: microseconds since the Unix epoch, UTC. The store writes every instant from
--   the host's system clock (G1: one clock; every process sharing the file runs on this host); the
--   defaults below read the same clock;
-- - `timeout` is an INTEGER: milliseconds;
-- - a boolean is an INTEGER, 0 or 1;
-- - `schema` is TEXT holding JSON;
-- - an id is an INTEGER PRIMARY KEY AUTOINCREMENT (never reused, like a sequence).

-- Which builds may use these tables (docs/operations.md, "Migrations across releases"); one row.
CREATE TABLE cron_compatibility (
    id                 INTEGER PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- The oldest migration a build must know to use these tables.
    required_migration INTEGER NOT NULL
);
INSERT INTO cron_compatibility (required_migration) VALUES (1);

-- One version of one module.
CREATE TABLE cron_deployments (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    key          TEXT NOT NULL UNIQUE,
    module       TEXT NOT NULL,
    schema       TEXT NOT NULL CHECK (json_valid(schema)),
    -- First registration; "the most recently registered deployment" orders by (created_at, id).
    created_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    active       INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    activated_at INTEGER
);

-- At most one active deployment per module.
CREATE UNIQUE INDEX cron_deployments_active_module ON cron_deployments (module) WHERE active = 1;
CREATE INDEX cron_deployments_module ON cron_deployments (module, created_at DESC, id DESC);

-- One verb of one deployment, with its schedule state.
CREATE TABLE cron_jobs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment_id        INTEGER NOT NULL REFERENCES cron_deployments (id) ON DELETE CASCADE,
    module_name          TEXT NOT NULL,
    verb                 TEXT NOT NULL,
    -- The expression and IANA zone as written; re-parsed by the runtime.
    schedule             TEXT NOT NULL,
    timezone             TEXT NOT NULL,
    -- Milliseconds.
    timeout              INTEGER NOT NULL CHECK (timeout >= 0),
    missed               TEXT NOT NULL DEFAULT 'once' CHECK (missed IN ('once', 'skip')),
    -- When the job's current schedule started counting (registration, or a takeover that changed it).
    start_time           INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    -- The next occurrence to run; NULL when the schedule has none left.
    next_execution       INTEGER,
    state                TEXT NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'executing')),
    lease_expires_at     INTEGER,
    -- The run that holds the row while executing: every finish is fenced on it.
    current_run_id       INTEGER,
    -- A paused verb is not claimed for its regular occurrences (`cronverb pause`, with a note); `pause`
    -- sets it on every deployment of the module, and a takeover carries it to the new deployment's row.
    paused               INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    pause_note           TEXT,
    paused_at            INTEGER,
    -- `cronverb trigger`: when set, the claim takes the row now (even when paused) and records a run
    -- scheduled at this instant with `manual = 1`, then clears it.
    trigger_requested_at INTEGER,
    UNIQUE (deployment_id, verb),
    CHECK ((state = 'executing') = (current_run_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim: a deployment's due rows in the order it takes them, (next_execution, id).
CREATE INDEX cron_jobs_due ON cron_jobs (deployment_id, next_execution, id)
    WHERE state = 'idle' AND paused = 0 AND next_execution IS NOT NULL;
-- Pending triggers, which the claim reads apart from the regular occurrences.
CREATE INDEX cron_jobs_triggered ON cron_jobs (deployment_id, trigger_requested_at)
    WHERE trigger_requested_at IS NOT NULL;
-- Recovery: executing rows whose lease expired.
CREATE INDEX cron_jobs_lease ON cron_jobs (lease_expires_at) WHERE state = 'executing';
-- The claim's "no run of this verb is executing under any deployment of its module".
CREATE INDEX cron_jobs_executing_verb ON cron_jobs (module_name, verb) WHERE state = 'executing';
-- Finish, renew and shutdown find a row by the run that holds it.
CREATE UNIQUE INDEX cron_jobs_current_run ON cron_jobs (current_run_id) WHERE current_run_id IS NOT NULL;

-- The run history. The unique key makes "each occurrence runs at most once" a database fact.
CREATE TABLE cron_job_runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The job and deployment of the run, or NULL once they are deleted (see the triggers below).
    job_id        INTEGER,
    deployment_id INTEGER,
    module_name   TEXT NOT NULL,
    verb          TEXT NOT NULL,
    scheduled_at  INTEGER NOT NULL,
    -- The later of the claim and the scheduled instant; NULL for a run recorded `skipped`.
    started_at    INTEGER,
    finished_at   INTEGER,
    outcome       TEXT NOT NULL DEFAULT 'running' CHECK (outcome IN (
                      'running', 'succeeded', 'failed', 'panicked', 'timed_out', 'cancelled',
                      'abandoned', 'skipped')),
    error         TEXT,
    -- The runner's name (`host:pid`) and id (cron_runners rows are deleted at shutdown).
    runner        TEXT NOT NULL,
    runner_id     INTEGER NOT NULL,
    late          INTEGER NOT NULL DEFAULT 0 CHECK (late IN (0, 1)),
    skipped       INTEGER NOT NULL DEFAULT 0,
    -- A run of `cronverb trigger`, scheduled at the trigger's instant.
    manual        INTEGER NOT NULL DEFAULT 0 CHECK (manual IN (0, 1)),
    UNIQUE (module_name, verb, scheduled_at)
);

-- `cronverb runs`: the latest runs first, of all verbs or of one.
CREATE INDEX cron_job_runs_scheduled ON cron_job_runs (scheduled_at DESC, id DESC);
CREATE INDEX cron_job_runs_verb ON cron_job_runs (verb, scheduled_at DESC, id DESC);

-- The run history keeps its rows when a job or a deployment is deleted, with the reference set to NULL
-- (as PostgreSQL's statement triggers do). Both look the runs up through the unique key's leading
-- columns: a job's runs are its verb's.
CREATE TRIGGER cron_jobs_forget_runs AFTER DELETE ON cron_jobs
BEGIN
    UPDATE cron_job_runs SET job_id = NULL
    WHERE module_name = OLD.module_name AND verb = OLD.verb AND job_id = OLD.id;
END;

CREATE TRIGGER cron_deployments_forget_runs AFTER DELETE ON cron_deployments
BEGIN
    UPDATE cron_job_runs SET deployment_id = NULL
    WHERE module_name = OLD.module AND deployment_id = OLD.id;
END;

-- The live processes, by heartbeat.
CREATE TABLE cron_runners (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment_id INTEGER NOT NULL REFERENCES cron_deployments (id) ON DELETE CASCADE,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    last_seen     INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))
);

CREATE INDEX cron_runners_deployment ON cron_runners (deployment_id, last_seen DESC);
