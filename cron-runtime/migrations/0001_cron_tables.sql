-- cronverb's tables (docs/operations.md, "The tables"). Every instant is the database's (G1: one clock).

-- Which builds may use these tables (docs/operations.md, "Migrations across releases").
--
-- A build of cronverb starts against a database that a newer release migrated, as long as the newer
-- migrations are additive. A release whose migration removes or changes what older builds read (a
-- "contract" migration) raises `required_migration` in the same migration; a build whose newest
-- migration is older than it refuses the database at startup, naming both versions.
CREATE TABLE cron_compatibility (
    -- One row.
    id                 BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    -- The oldest migration a build must know to use these tables.
    required_migration BIGINT NOT NULL
);
INSERT INTO cron_compatibility (required_migration) VALUES (1);

-- Every replica checks it at startup, also one whose role was granted only the four tables.
GRANT SELECT ON cron_compatibility TO PUBLIC;

-- One version of one module.
CREATE TABLE cron_deployments (
    id           BIGSERIAL PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    module       TEXT NOT NULL,
    schema       JSONB NOT NULL,
    -- First registration; "the most recently registered deployment" orders by (created_at, id).
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    active       BOOLEAN NOT NULL DEFAULT false,
    activated_at TIMESTAMPTZ
);

-- At most one active deployment per module.
CREATE UNIQUE INDEX cron_deployments_active_module ON cron_deployments (module) WHERE active;
CREATE INDEX cron_deployments_module ON cron_deployments (module, created_at DESC, id DESC);

-- One verb of one deployment, with its schedule state.
CREATE TABLE cron_jobs (
    id                   BIGSERIAL PRIMARY KEY,
    deployment_id        BIGINT NOT NULL REFERENCES cron_deployments (id) ON DELETE CASCADE,
    module_name          TEXT NOT NULL,
    verb                 TEXT NOT NULL,
    -- The expression and IANA zone as written; re-parsed by the runtime.
    schedule             TEXT NOT NULL,
    timezone             TEXT NOT NULL,
    timeout              INTERVAL NOT NULL,
    missed               TEXT NOT NULL DEFAULT 'once' CHECK (missed IN ('once', 'skip')),
    -- When the job's current schedule started counting (registration, or a takeover that changed it).
    start_time           TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The next occurrence to run; NULL when the schedule has none left.
    next_execution       TIMESTAMPTZ,
    state                TEXT NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'executing')),
    lease_expires_at     TIMESTAMPTZ,
    -- The run that holds the row while executing: every finish is fenced on it.
    current_run_id       BIGINT,
    -- A paused verb is not claimed for its regular occurrences (`cronverb pause`, with a note); `pause`
    -- sets it on every deployment of the module, and a takeover carries it to the new deployment's row.
    paused               BOOLEAN NOT NULL DEFAULT false,
    pause_note           TEXT,
    paused_at            TIMESTAMPTZ,
    -- `cronverb trigger`: when set, the claim takes the row now (even when paused) and records a run
    -- scheduled at this instant with `manual = true`, then clears it.
    trigger_requested_at TIMESTAMPTZ,
    UNIQUE (deployment_id, verb),
    CHECK ((state = 'executing') = (current_run_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim: a deployment's due rows in the order it takes them, (next_execution, id), so that it reads
-- them up to its limit instead of sorting all of them.
CREATE INDEX cron_jobs_due ON cron_jobs (deployment_id, next_execution, id)
    WHERE state = 'idle' AND NOT paused AND next_execution IS NOT NULL;
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
--
-- A finish changes a run's outcome, error, finished_at and skipped. No index covers any of them, and
-- pages keep room (fillfactor), so that PostgreSQL writes the new version beside the old one and
-- touches no index (a HOT update). Runs in flight are found through the executing job rows
-- (`current_run_id`), and retention reads runs by `scheduled_at` (a run finishes after its scheduled
-- instant).
CREATE TABLE cron_job_runs (
    id            BIGSERIAL PRIMARY KEY,
    -- The job and deployment of the run, or NULL once they are deleted (see the triggers below).
    job_id        BIGINT,
    deployment_id BIGINT,
    module_name   TEXT NOT NULL,
    verb          TEXT NOT NULL,
    scheduled_at  TIMESTAMPTZ NOT NULL,
    -- The later of the claim and the scheduled instant; NULL for a run recorded `skipped`.
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ,
    outcome       TEXT NOT NULL DEFAULT 'running' CHECK (outcome IN (
                      'running', 'succeeded', 'failed', 'panicked', 'timed_out', 'cancelled',
                      'abandoned', 'skipped')),
    error         TEXT,
    -- The runner's name (`host:pid`) and id (cron_runners rows are deleted at shutdown).
    runner        TEXT NOT NULL,
    runner_id     BIGINT NOT NULL,
    late          BOOLEAN NOT NULL DEFAULT false,
    skipped       INTEGER NOT NULL DEFAULT 0,
    -- A run of `cronverb trigger`, scheduled at the trigger's instant.
    manual        BOOLEAN NOT NULL DEFAULT false,
    UNIQUE (module_name, verb, scheduled_at)
) WITH (fillfactor = 70);

-- `cronverb runs`: the latest runs first, of all verbs or of one.
CREATE INDEX cron_job_runs_scheduled ON cron_job_runs (scheduled_at DESC, id DESC);
CREATE INDEX cron_job_runs_verb ON cron_job_runs (verb, scheduled_at DESC, id DESC);

-- The run history keeps its rows when a job or a deployment is deleted, with the reference set to NULL.
-- No foreign key does it: a foreign key's checks would cost two queries for every run inserted. A run
-- is only ever inserted for a job row the claim holds locked, so the references are valid when
-- written; a statement that deletes jobs or deployments clears them, once per statement. Both look the
-- runs up through the unique key's leading columns: a job's runs are its verb's.
CREATE FUNCTION cron_job_runs_forget_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cron_job_runs r SET job_id = NULL FROM gone
    WHERE r.module_name = gone.module_name AND r.verb = gone.verb AND r.job_id = gone.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER cron_jobs_forget_runs AFTER DELETE ON cron_jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION cron_job_runs_forget_jobs();

CREATE FUNCTION cron_job_runs_forget_deployments() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cron_job_runs r SET deployment_id = NULL FROM gone
    WHERE r.module_name = gone.module AND r.deployment_id = gone.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER cron_deployments_forget_runs AFTER DELETE ON cron_deployments
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION cron_job_runs_forget_deployments();

-- The live replicas, by heartbeat.
CREATE TABLE cron_runners (
    id            BIGSERIAL PRIMARY KEY,
    deployment_id BIGINT NOT NULL REFERENCES cron_deployments (id) ON DELETE CASCADE,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX cron_runners_deployment ON cron_runners (deployment_id, last_seen DESC);
