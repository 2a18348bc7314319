-- The audit trail (docs/operations.md, "Audit trail"): one row per operator action (`deploy`, `pause`,
-- `resume`, `trigger`, `backfill`, `cancel_backfill`, `prune`, and the actions later releases add),
-- written by the operator API in the transaction of the action it records. Additive ("Migrations across
-- releases"): the replicas never read nor write it, so a release that does not know it keeps working;
-- only the operator API of a release that knows it writes rows. The runtime never deletes a row by
-- itself: `cronverb prune --audit-older-than AGE` does.
CREATE TABLE cron_audit (
    id           BIGSERIAL PRIMARY KEY,
    -- The database's clock when the action's transaction began.
    at           TIMESTAMPTZ NOT NULL,
    actor        TEXT NOT NULL,
    origin       TEXT NOT NULL,
    host         TEXT,
    action       TEXT NOT NULL,
    module       TEXT,
    verb         TEXT,
    -- Small JSON objects: the state the action changed, before and after it.
    state_before TEXT,
    state_after  TEXT,
    note         TEXT
);

-- `cronverb audit --since`, newest first, and its retention.
CREATE INDEX cron_audit_at ON cron_audit (at);
-- `cronverb audit --verb`, newest first.
CREATE INDEX cron_audit_verb ON cron_audit (verb, at);
