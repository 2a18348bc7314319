//! Notifications to the other replicas, sent when the transaction commits (docs/runtime.md, "Waking
//! up"). PostgreSQL folds the duplicates of one transaction.

statements! { "notify";
    /// Wakes the replicas of each module of `$2` on channel `$1` (`NOTIFY_CHANNEL`): jobs of the module
    /// may be due now.
    NOTIFY_MODULES = "SELECT pg_notify($1, module) FROM unnest($2::text[]) AS module";

    /// Wakes the replicas of deployment `$2`'s module on each channel of `$1` (`NOTIFY_CHANNEL` and
    /// `REPLICAS_CHANNEL`).
    NOTIFY_DEPLOYMENT = "SELECT pg_notify(channel, module) FROM cron_deployments, unnest($1::text[]) AS channel WHERE id = $2";

    /// Sends each payload of `$2` (`module<TAB>microseconds`) on channel `$1` (`DUE_CHANNEL`).
    NOTIFY_DUE = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload";
}
