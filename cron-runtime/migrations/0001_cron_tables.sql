-- The tables of DESIGN §4. Every instant is the database's (contract 1: one clock).

-- One version of one module.
CREATE TABLE cron_deployments (
    id          BIGSERIAL PRIMARY KEY,
    key         TEXT NOT NULL UNIQUE,
    module      TEXT NOT NULL,
    schema      JSONB NOT NULL,
    -- First registration; "the most recently registered deployment" orders by (created_at, id).
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    active      BOOLEAN NOT NULL DEFAULT false,
    activated_at TIMESTAMPTZ
);

-- At most one active deployment per module.
CREATE UNIQUE INDEX cron_deployments_active_module ON cron_deployments (module) WHERE active;
CREATE INDEX cron_deployments_module ON cron_deployments (module, created_at DESC, id DESC);

-- One verb of one deployment, with its schedule state.
CREATE TABLE cron_jobs (
    id               BIGSERIAL PRIMARY KEY,
    deployment_id    BIGINT NOT NULL REFERENCES cron_deployments (id) ON DELETE CASCADE,
    module_name      TEXT NOT NULL,
    verb             TEXT NOT NULL,
    -- The expression and IANA zone as written; re-parsed by the runtime.
    schedule         TEXT NOT NULL,
    timezone         TEXT NOT NULL,
    timeout          INTERVAL NOT NULL,
    missed           TEXT NOT NULL DEFAULT 'once' CHECK (missed IN ('once', 'skip')),
    -- When the job's current schedule started counting (registration, or a takeover that changed it).
    start_time       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The next occurrence to run; NULL when the schedule has none left.
    next_execution   TIMESTAMPTZ,
    state            TEXT NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'executing')),
    lease_expires_at TIMESTAMPTZ,
    -- The run that holds the row while executing: every finish is fenced on it.
    current_run_id   BIGINT,
    paused           BOOLEAN NOT NULL DEFAULT false,
    UNIQUE (deployment_id, verb),
    CHECK ((state = 'executing') = (current_run_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim: idle jobs of one deployment in order of their next occurrence.
CREATE INDEX cron_jobs_due ON cron_jobs (deployment_id, next_execution)
    WHERE state = 'idle' AND NOT paused AND next_execution IS NOT NULL;
-- Recovery: executing rows whose lease expired.
CREATE INDEX cron_jobs_lease ON cron_jobs (lease_expires_at) WHERE state = 'executing';
-- The claim's "no run of this verb is executing under any deployment of its module".
CREATE INDEX cron_jobs_executing_verb ON cron_jobs (module_name, verb) WHERE state = 'executing';
-- Finish, renew and shutdown find a row by the run that holds it.
CREATE UNIQUE INDEX cron_jobs_current_run ON cron_jobs (current_run_id) WHERE current_run_id IS NOT NULL;

-- The run history. The unique key makes "each occurrence runs at most once" a database fact.
CREATE TABLE cron_job_runs (
    id            BIGSERIAL PRIMARY KEY,
    job_id        BIGINT REFERENCES cron_jobs (id) ON DELETE SET NULL,
    deployment_id BIGINT REFERENCES cron_deployments (id) ON DELETE SET NULL,
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
    UNIQUE (module_name, verb, scheduled_at)
);

CREATE INDEX cron_job_runs_job ON cron_job_runs (job_id, scheduled_at DESC);
CREATE INDEX cron_job_runs_running ON cron_job_runs (started_at) WHERE outcome = 'running';

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
