//! `cronverb backfill` (docs/operations.md, "Backfill"): queues the occurrences of a verb's schedule in
//! a window that have no run, for the replicas' own claim to run in order, one at a time, as manual
//! runs of their own instants recorded as backfills; cancels what has not started; reads the queue's
//! progress for `status`. What is queued is decided by `rules::backfill`, the same on every store; the
//! statements are written once for both databases (`$N` parameters, which sqlx's SQLite driver reads
//! too; instants bind as each driver's `At`).

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AdminError;
use super::audit::{Action, Actor, Record, record};
use super::lookup::resolve_verb;
use super::rows::{At, QueueRow};
use super::sql::{Dialect, SqlAdmin, Statement, db, unmigrated};
use crate::rfc3339;
use crate::store::rules::backfill::Backfill;

/// The schedule text of verb `$2` in deployment `$1`: its expression and zone.
const ROW: &str = "
SELECT schedule, timezone FROM cron_jobs WHERE deployment_id = $1 AND verb = $2
";

/// Whether verb `$2` of deployment `$1` runs on every replica.
const EVERY_REPLICA: &str = "
SELECT every_replica FROM cron_jobs WHERE deployment_id = $1 AND verb = $2
";

/// The occurrences of verb `$2` of module `$1` in `[$3, $4)` that have a run, of any kind and
/// deployment (the unique key's leading columns read them).
const RAN: &str = "
SELECT scheduled_at FROM cron_job_runs
WHERE module_name = $1 AND verb = $2 AND scheduled_at >= $3 AND scheduled_at < $4
";

/// The occurrences of verb `$2` of module `$1` in `[$3, $4)` queued already.
const QUEUED: &str = "
SELECT scheduled_at FROM cron_backfills
WHERE module_name = $1 AND verb = $2 AND scheduled_at >= $3 AND scheduled_at < $4
";

/// How many occurrences one [`QUEUE`] statement queues: 503 parameters, under the 999 of SQLite's
/// oldest limit and PostgreSQL's 65,535.
const QUEUE_ROWS: usize = 500;

/// Queues occurrences `$4` … `$503` ([`QUEUE_ROWS`]) of verb `$2` of module `$1`, asked for at `$3`:
/// one multi-row insert, valid on both databases. A last batch shorter than that repeats its last
/// occurrence, which the conflict clause drops (docs/benchmarks.md, "A backfill of 100,000
/// occurrences").
static QUEUE: LazyLock<String> = LazyLock::new(|| {
    let rows: Vec<String> = (0..QUEUE_ROWS)
        .map(|i| format!("($1, $2, ${}, $3)", i + 4))
        .collect();
    format!(
        "INSERT INTO cron_backfills (module_name, verb, scheduled_at, requested_at) VALUES {} \
         ON CONFLICT DO NOTHING",
        rows.join(", ")
    )
});

/// Drops every queued occurrence of verb `$2` of module `$1`.
const CANCEL: &str = "
DELETE FROM cron_backfills WHERE module_name = $1 AND verb = $2
";

/// How many occurrences each verb has queued, and its earliest, by module and verb.
pub(crate) const PROGRESS: &str = "
SELECT module_name, verb, count(*) AS queued, min(scheduled_at) AS next
FROM cron_backfills GROUP BY module_name, verb ORDER BY module_name, verb
";

/// Every statement of this file, by name, for the tests that prepare them on each database.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn statements() -> [(&'static str, &'static str); 8] {
    [
        ("admin::backfill::ROW", ROW),
        ("admin::backfill::EVERY_REPLICA", EVERY_REPLICA),
        ("admin::backfill::RAN", RAN),
        ("admin::backfill::QUEUED", QUEUED),
        ("admin::backfill::QUEUE", QUEUE.as_str()),
        ("admin::backfill::CANCEL", CANCEL),
        ("admin::backfill::PROGRESS", PROGRESS),
        (
            "store::sql::backfill::DROP_QUEUED",
            crate::store::sql::backfill::DROP_QUEUED,
        ),
    ]
}

/// The result of [`Admin::backfill`](super::Admin::backfill).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backfilled {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// The key of the module's active deployment, whose schedule gave the occurrences.
    pub deployment: String,
    /// The window's start (included).
    #[serde(with = "rfc3339")]
    pub from: DateTime<Utc>,
    /// The window's end (excluded).
    #[serde(with = "rfc3339")]
    pub to: DateTime<Utc>,
    /// Nothing was queued: `queued` says what would have been.
    pub dry_run: bool,
    /// The schedule's occurrences in the window.
    pub occurrences: usize,
    /// Those that have a recorded run, left out: a backfill never repeats an occurrence.
    pub already_ran: usize,
    /// Those queued by an earlier backfill and not run yet, left out.
    pub already_queued: usize,
    /// The occurrences queued now (or, with `dry_run`, that would be), in the order they run.
    pub queued: Vec<Occurrence>,
    /// The live replicas of the deployment: with none, the queue waits for one.
    pub live_replicas: i64,
}

/// One occurrence of [`Backfilled::queued`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Occurrence {
    /// Its instant: the run is recorded as scheduled at it.
    #[serde(with = "rfc3339")]
    pub scheduled_at: DateTime<Utc>,
}

/// The result of [`Admin::cancel_backfill`](super::Admin::cancel_backfill).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillCancelled {
    /// The verb's module.
    pub module: String,
    /// The verb's full name.
    pub verb: String,
    /// How many queued occurrences were dropped; a run in flight is not one of them and goes on.
    pub cancelled: u64,
}

/// A verb's backfill in progress, in [`JobStatus::backfill`](super::JobStatus::backfill).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillProgress {
    /// The occurrences queued and not started yet.
    pub queued: u64,
    /// The earliest of them: the next to run.
    #[serde(with = "rfc3339")]
    pub next: DateTime<Utc>,
}

/// [`Admin::backfill`](super::Admin::backfill).
pub(crate) async fn backfill<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    dry_run: bool,
) -> Result<Backfilled, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("backfilling `{verb}`");
    let mut tx = admin.write(&context).await?;
    let active = tx.active_deployment(&module, &context).await?;
    let row: Option<(String, String)> = Statement::<D>::new(ROW)
        .bind(active.id)
        .bind(verb.clone())
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let Some((expression, zone)) = row else {
        return Err(AdminError::NotInActiveDeployment {
            module,
            verb,
            deployment: active.key,
        });
    };
    let every_replica: Option<(bool,)> = Statement::<D>::new(EVERY_REPLICA)
        .bind(active.id)
        .bind(verb.clone())
        .fetch_optional(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    if every_replica.is_some_and(|(every,)| every) {
        return Err(AdminError::BackfillRefused(format!(
            "verb `{verb}` runs on every replica (`on = \"every_replica\"`): it cannot be \
             backfilled, each replica runs it at its own occurrences"
        )));
    }
    let schedule = admin.schedule(&expression, &zone).map_err(|e| {
        AdminError::BackfillRefused(format!(
            "the schedule of `{verb}` in deployment `{}` does not parse: {e}",
            active.key
        ))
    })?;
    let within = |sql| {
        Statement::<D>::new(sql)
            .bind(module.clone())
            .bind(verb.clone())
            .bind(At(from))
            .bind(At(to))
    };
    let ran: Vec<(At,)> = within(RAN)
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let queued: Vec<(At,)> = within(QUEUED)
        .fetch_all(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let ran: HashSet<DateTime<Utc>> = ran.into_iter().map(|(at,)| at.0).collect();
    let queued: HashSet<DateTime<Utc>> = queued.into_iter().map(|(at,)| at.0).collect();
    let plan = Backfill::plan(
        &verb,
        &schedule,
        from,
        to,
        tx.now,
        |at| ran.contains(&at),
        |at| queued.contains(&at),
    )
    .map_err(AdminError::BackfillRefused)?;
    if !dry_run && !plan.to_queue.is_empty() {
        for batch in plan.to_queue.chunks(QUEUE_ROWS) {
            let mut queue = Statement::<D>::new(QUEUE.as_str())
                .bind(module.clone())
                .bind(verb.clone())
                .bind(At(tx.now));
            let last = batch[batch.len() - 1];
            for i in 0..QUEUE_ROWS {
                queue = queue.bind(At(batch.get(i).copied().unwrap_or(last)));
            }
            queue.execute(&mut tx.tx).await.map_err(db(&context))?;
        }
        tx.notify(&module).await.map_err(db(&context))?;
    }
    if !dry_run {
        // A dry run changes nothing and is not recorded; a backfill that queues nothing is.
        let backfilled = Record {
            action: Action::Backfill,
            module: Some(&module),
            verb: Some(&verb),
            before: Some(serde_json::json!({ "queued": plan.already_queued })),
            after: Some(serde_json::json!({
                "queued": plan.already_queued + plan.to_queue.len(),
                "from": rfc3339::format(from),
                "to": rfc3339::format(to),
                "deployment": active.key,
            })),
            note: None,
        };
        record(&mut tx, actor, backfilled, &context).await?;
    }
    tx.commit().await.map_err(db(&context))?;
    Ok(Backfilled {
        module,
        verb,
        deployment: active.key,
        from,
        to,
        dry_run,
        occurrences: plan.occurrences.len(),
        already_ran: plan.already_ran,
        already_queued: plan.already_queued,
        queued: plan
            .to_queue
            .into_iter()
            .map(|scheduled_at| Occurrence { scheduled_at })
            .collect(),
        live_replicas: active.live_replicas,
    })
}

/// [`Admin::cancel_backfill`](super::Admin::cancel_backfill).
pub(crate) async fn cancel<D: Dialect>(
    admin: &SqlAdmin<D>,
    actor: &Actor,
    verb: &str,
    module: Option<&str>,
) -> Result<BackfillCancelled, AdminError> {
    let (module, verb) = resolve_verb(admin, verb, module).await?;
    let context = format!("cancelling the backfill of `{verb}`");
    let mut tx = admin.write(&context).await?;
    let cancelled = Statement::<D>::new(CANCEL)
        .bind(module.clone())
        .bind(verb.clone())
        .execute(&mut tx.tx)
        .await
        .map_err(db(&context))?;
    let cancelled_backfill = Record {
        action: Action::CancelBackfill,
        module: Some(&module),
        verb: Some(&verb),
        before: Some(serde_json::json!({ "queued": cancelled })),
        after: Some(serde_json::json!({ "queued": 0 })),
        note: None,
    };
    record(&mut tx, actor, cancelled_backfill, &context).await?;
    tx.commit().await.map_err(db(&context))?;
    Ok(BackfillCancelled {
        module,
        verb,
        cancelled,
    })
}

/// Every verb's backfill in progress, by module and verb.
pub(crate) async fn progress<D: Dialect>(
    admin: &SqlAdmin<D>,
) -> Result<BTreeMap<(String, String), BackfillProgress>, AdminError> {
    let context = "reading the backfills";
    let mut conn = admin.read(context).await?;
    let rows: Vec<QueueRow> = Statement::<D>::new(PROGRESS)
        .fetch_all(&mut conn)
        .await
        .map_err(unmigrated::<D>(context))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let progress = BackfillProgress {
                queued: u64::try_from(row.queued).unwrap_or_default(),
                next: row.next.0,
            };
            ((row.module_name, row.verb), progress)
        })
        .collect())
}
