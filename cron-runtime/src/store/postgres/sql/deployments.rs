//! `cron_deployments`: registration and takeover (G6, docs/operations.md).

statements! { "deployments";
    /// Registers deployment `$1` of module `$2` with schema `$3` unless its key exists; returns its id
    /// when it inserted it.
    INSERT_DEPLOYMENT = "INSERT INTO cron_deployments (key, module, schema) VALUES ($1, $2, $3::jsonb)
ON CONFLICT (key) DO NOTHING RETURNING id";

    /// The deployment registered with key `$1`, with its schema only when it is not the same JSON as `$2`
    /// (jsonb equality, so a replica of the same build never reads it back).
    REGISTERED = "SELECT id, module, CASE WHEN schema = $2::jsonb THEN NULL ELSE schema::text END AS other_schema
FROM cron_deployments WHERE key = $1";

    /// Whether deployment `$1` is active, read after its rows were locked. The statement that locked them
    /// read the deployment as it was when that statement began: a takeover that held the rows and
    /// committed meanwhile is seen only now (it locks the rows of the deployment it deactivates first).
    ACTIVE = "SELECT active FROM cron_deployments WHERE id = $1";

    /// Which of the deployments `$1` are active, read after their rows were locked (as [`ACTIVE`]).
    ACTIVE_AMONG = "SELECT id FROM cron_deployments WHERE id = ANY($1) AND active";

    /// The deployment of module `$1` that should be active: the most recently registered one with a
    /// replica seen within `$2` seconds (`elected`); whether deployment `$3` is active now; and the key of
    /// the module's active deployment.
    ELECTED = "SELECT (
    SELECT d.id
    FROM cron_deployments d
    WHERE d.module = $1
      AND EXISTS (
          SELECT 1 FROM cron_runners r
          WHERE r.deployment_id = d.id AND r.last_seen >= now() - make_interval(secs => $2))
    ORDER BY d.created_at DESC, d.id DESC
    LIMIT 1
) AS elected,
(SELECT active FROM cron_deployments WHERE id = $3) AS active,
(SELECT key FROM cron_deployments WHERE module = $1 AND active) AS active_key";

    /// One takeover of module `$1` at a time, until the transaction ends.
    TAKEOVER_LOCK = "SELECT pg_advisory_xact_lock(hashtext('cronverb'), hashtext($1))";

    /// Deactivates the active deployment of module `$1`; returns its id and key.
    DEACTIVATE = "UPDATE cron_deployments SET active = false WHERE module = $1 AND active RETURNING id, key";

    /// Activates deployment `$1`; returns its key.
    ACTIVATE = "UPDATE cron_deployments SET active = true, activated_at = now() WHERE id = $1 RETURNING key";
}
