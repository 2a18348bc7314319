//! The audit trail's cases of the operator API's shared suite (docs/operations.md, "Audit trail"):
//! every action writes one row naming its actor, in its own transaction, and a refused one writes none.

use chrono::Utc;
use cron_runtime::admin::{
    Actor, AdminError, AuditEntry, AuditFilter, DropReason, DroppedOverride, Origin, Since,
};
use cron_runtime::store::Store;
use serde_json::json;

use super::{AdminUnderTest, HOURLY, schema};
use crate::support::{deployment, job};

/// The whole trail, newest first.
async fn trail(admin: &cron_runtime::admin::Admin) -> Vec<AuditEntry> {
    admin
        .audit(&AuditFilter {
            limit: 1000,
            ..AuditFilter::default()
        })
        .await
        .unwrap()
}

/// The newest row, after checking that the trail grew by exactly one row since it had `before`.
async fn one_more(admin: &cron_runtime::admin::Admin, before: usize) -> AuditEntry {
    let rows = trail(admin).await;
    assert_eq!(rows.len(), before + 1, "one action, one row: {rows:#?}");
    rows.into_iter().next().unwrap()
}

pub async fn every_action_writes_one_row_naming_its_actor_and_a_refused_one_none(
    db: &impl AdminUnderTest,
) {
    let actor = Actor::new("alice", Origin::Cli).on_host(Some("ops-1".to_owned()));
    let admin = db.admin().with_actor(actor);
    assert!(trail(&admin).await.is_empty());

    let first = schema("billing", &[("billing::report", HOURLY)]);
    admin.deploy("billing@0", &first, None).await.unwrap();
    let row = one_more(&admin, 0).await;
    assert_eq!(
        (row.actor.as_str(), row.origin.as_str(), row.host.as_deref()),
        ("alice", "cli", Some("ops-1"))
    );
    assert_eq!(row.action, "deploy");
    assert_eq!(row.module.as_deref(), Some("billing"));
    assert_eq!(row.verb, None);
    assert_eq!(row.before, Some(json!({ "active": null })));
    assert_eq!(
        row.after,
        Some(json!({ "key": "billing@0", "created": true, "active": false }))
    );
    let later = Utc::now() + chrono::Duration::seconds(5);
    assert!(row.at <= later, "the database's clock, not the future");

    // A key registered with other jobs is refused: no row.
    let other = schema("billing", &[("billing::report", "30 * * * *")]);
    assert!(admin.deploy("billing@0", &other, None).await.is_err());
    assert_eq!(trail(&admin).await.len(), 1);

    let replica = db.replica();
    let runner = replica
        .register(&deployment(
            "billing@1",
            vec![job("billing::report", HOURLY)],
        ))
        .await
        .unwrap();

    admin
        .pause("report", None, Some("INC-7 <b>"))
        .await
        .unwrap();
    let row = one_more(&admin, 1).await;
    assert_eq!(row.action, "pause");
    assert_eq!(row.verb.as_deref(), Some("billing::report"));
    assert_eq!(row.note.as_deref(), Some("INC-7 <b>"));
    assert_eq!(row.before, Some(json!({ "paused": false, "note": null })));
    assert_eq!(
        row.after,
        Some(json!({ "paused": true, "note": "INC-7 <b>" }))
    );
    // Pausing a paused verb is accepted and recorded, its state unchanged.
    admin.pause("report", None, None).await.unwrap();
    let row = one_more(&admin, 2).await;
    assert_eq!(row.action, "pause");
    assert_eq!(row.before, row.after);
    // An unknown verb is refused: no row.
    assert!(matches!(
        admin.pause("nope", None, None).await,
        Err(AdminError::UnknownVerb { .. })
    ));
    assert_eq!(trail(&admin).await.len(), 3);

    admin.resume("report", None).await.unwrap();
    let row = one_more(&admin, 3).await;
    assert_eq!(row.action, "resume");
    assert_eq!(row.after, Some(json!({ "paused": false, "note": null })));

    let triggered = admin.trigger("report", None).await.unwrap();
    let row = one_more(&admin, 4).await;
    assert_eq!(row.action, "trigger");
    assert_eq!(row.before, Some(json!({ "trigger_pending": null })));
    let after = row.after.unwrap();
    assert_eq!(after["deployment"], "billing@1");
    assert!(after["trigger_pending"].is_string());
    // The trigger is claimed: the verb executes and a second trigger is refused, with no row.
    let claimed = replica
        .claim_due(&runner, std::time::Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(claimed.claims[0].scheduled_at, triggered.requested_at);
    assert!(matches!(
        admin.trigger("report", None).await,
        Err(AdminError::Executing { .. })
    ));
    assert_eq!(trail(&admin).await.len(), 5);

    let now = Utc::now();
    let (from, to) = (
        now - chrono::Duration::hours(3),
        now - chrono::Duration::minutes(1),
    );
    admin
        .backfill("report", None, from, to, true)
        .await
        .unwrap();
    assert_eq!(trail(&admin).await.len(), 5, "a dry run is not recorded");
    let backfilled = admin
        .backfill("report", None, from, to, false)
        .await
        .unwrap();
    let row = one_more(&admin, 5).await;
    assert_eq!(row.action, "backfill");
    assert_eq!(row.before, Some(json!({ "queued": 0 })));
    assert_eq!(
        row.after.as_ref().unwrap()["queued"],
        json!(backfilled.queued.len())
    );

    let cancelled = admin.cancel_backfill("report", None).await.unwrap();
    let row = one_more(&admin, 6).await;
    assert_eq!(row.action, "cancel_backfill");
    assert_eq!(row.before, Some(json!({ "queued": cancelled.cancelled })));
    assert_eq!(row.after, Some(json!({ "queued": 0 })));

    admin
        .prune(std::time::Duration::from_secs(86400), 10)
        .await
        .unwrap();
    let row = one_more(&admin, 7).await;
    assert_eq!(row.action, "prune");
    assert_eq!((row.module, row.verb), (None, None));
    assert_eq!(
        row.after,
        Some(json!({ "older_than_secs": 86400, "runs_deleted": 0 }))
    );
    // The runs' prune left the trail alone; its own prune keeps what is younger than its age.
    let deleted = admin
        .prune_audit(std::time::Duration::from_secs(86400))
        .await
        .unwrap();
    assert_eq!(deleted, 0);
    let rows = trail(&admin).await;
    assert_eq!(rows.len(), 9);
    assert_eq!(
        rows[0].after,
        Some(json!({ "audit_older_than_secs": 86400, "audit_deleted": 0 }))
    );
    // Newest first.
    let actions: Vec<&str> = rows.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "prune",
            "prune",
            "cancel_backfill",
            "backfill",
            "trigger",
            "resume",
            "pause",
            "pause",
            "deploy"
        ]
    );
    assert!(rows.windows(2).all(|w| w[0].id > w[1].id));
}

pub async fn the_audit_trail_reads_by_verb_and_age_and_an_admin_acts_through_the_api_unless_told(
    db: &impl AdminUnderTest,
) {
    let admin = db.admin();
    assert_eq!(admin.actor().origin(), Origin::Api);
    let replica = db.replica();
    replica
        .register(&deployment(
            "billing@1",
            vec![job("billing::report", HOURLY), job("billing::send", HOURLY)],
        ))
        .await
        .unwrap();
    admin.pause("report", None, None).await.unwrap();
    admin.pause("send", None, None).await.unwrap();
    admin
        .clone()
        .with_actor(Actor::new("board", Origin::Dashboard))
        .resume("send", None)
        .await
        .unwrap();

    let read = |verb: Option<&str>, since: Option<Since>, limit: u32| {
        let filter = AuditFilter {
            verb: verb.map(str::to_owned),
            module: None,
            since,
            limit,
        };
        let admin = admin.clone();
        async move { admin.audit(&filter).await.unwrap() }
    };
    let all = read(None, None, 50).await;
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].origin, "dashboard");
    assert_eq!(all[0].actor, "board");
    assert_eq!(all[1].origin, "api");
    let send = read(Some("send"), None, 50).await;
    assert_eq!(
        send.iter().map(|r| r.action.as_str()).collect::<Vec<_>>(),
        ["resume", "pause"],
        "a verb named in its module reads as its full name"
    );
    assert_eq!(read(Some("billing::report"), None, 50).await.len(), 1);
    assert_eq!(read(Some("gone::verb"), None, 50).await.len(), 0);
    let hour = std::time::Duration::from_secs(3600);
    assert_eq!(read(None, Some(Since::Ago(hour)), 50).await.len(), 3);
    let oldest = all[2].at;
    assert_eq!(read(None, Some(Since::Instant(oldest)), 50).await.len(), 3);
    let after_newest = all[0].at + chrono::Duration::microseconds(1);
    assert_eq!(
        read(None, Some(Since::Instant(after_newest)), 50)
            .await
            .len(),
        0
    );
    assert_eq!(read(None, None, 2).await.len(), 2);
    assert_eq!(read(None, None, 2).await[0].id, all[0].id);
}

/// The trail's retention is its own (docs/operations.md, "Audit trail"): a prune of the runs history
/// leaves an old row of it, and the trail's prune deletes the rows older than its age, then writes its
/// own row.
pub async fn the_runs_prune_keeps_an_old_audit_row_and_the_trails_own_prune_deletes_it(
    db: &impl AdminUnderTest,
) {
    let admin = db.admin();
    db.replica()
        .register(&deployment(
            "billing@1",
            vec![job("billing::report", HOURLY)],
        ))
        .await
        .unwrap();
    admin.pause("report", None, None).await.unwrap();
    db.age_audit(10).await;
    let week = std::time::Duration::from_secs(7 * 86400);
    let actions = |rows: Vec<AuditEntry>| {
        rows.into_iter()
            .map(|row| row.action)
            .collect::<Vec<String>>()
    };

    admin.prune(week, 10).await.unwrap();
    assert_eq!(
        actions(trail(&admin).await),
        ["prune", "pause"],
        "the runs' prune keeps the trail's ten-day-old row"
    );
    let deleted = admin.prune_audit(week).await.unwrap();
    assert_eq!(deleted, 1, "the row older than a week");
    let rows = trail(&admin).await;
    assert_eq!(
        rows[0].after,
        Some(json!({ "audit_older_than_secs": 604800, "audit_deleted": 1 }))
    );
    assert_eq!(actions(rows), ["prune", "prune"]);
}

/// A takeover that drops an override its verb outlived writes one row per override it drops, in its
/// own transaction (docs/operations.md, "Audit trail"): `cronverb audit` says why the override
/// vanished, and who dropped it (the deployment that took over, from its replica's host).
pub async fn a_takeover_that_drops_an_outlived_override_writes_its_row(db: &impl AdminUnderTest) {
    let admin = db.admin();
    let both = || {
        vec![
            job("billing::report", HOURLY),
            job("billing::cleanup", HOURLY),
        ]
    };
    let old = db.replica();
    old.register(&deployment("billing@1", both()))
        .await
        .unwrap();
    admin
        .reschedule("cleanup", None, "*/20 * * * *", None, None)
        .await
        .unwrap();
    // `cronverb deploy` of the code without the verb says the override goes at its takeover, when
    // it registers the key and when it is run again, and its own row records no drop.
    let without = schema("billing", &[("billing::report", HOURLY)]);
    for _ in 0..2 {
        let deployed = admin.deploy("billing@2", &without, None).await.unwrap();
        assert_eq!(
            deployed.dropped_overrides,
            [DroppedOverride {
                verb: "billing::cleanup".to_owned(),
                expression: "*/20 * * * *".to_owned(),
                timezone: "UTC".to_owned(),
                reason: DropReason::Removed,
            }]
        );
        let row = trail(&admin).await.remove(0);
        assert_eq!(row.action, "deploy");
        assert_eq!(row.after.unwrap().get("dropped_overrides"), None);
    }
    let before = trail(&admin).await.len();

    let new = db.replica();
    new.register(&deployment(
        "billing@3",
        vec![job("billing::report", HOURLY)],
    ))
    .await
    .unwrap();
    let row = one_more(&admin, before).await;
    assert_eq!(row.action, "override_dropped");
    assert_eq!(
        (row.actor.as_str(), row.origin.as_str()),
        ("billing@3", "api")
    );
    assert!(row.host.is_some(), "the replica's host");
    assert_eq!(row.module.as_deref(), Some("billing"));
    assert_eq!(row.verb.as_deref(), Some("billing::cleanup"));
    assert_eq!(
        row.before,
        Some(json!({ "schedule": "*/20 * * * *", "timezone": "UTC", "overridden": true }))
    );
    assert_eq!(
        row.after,
        Some(json!({ "overridden": false, "deployment": "billing@3" }))
    );
    // Another takeover drops nothing more: no row.
    db.replica()
        .register(&deployment("billing@4", both()))
        .await
        .unwrap();
    assert_eq!(trail(&admin).await.len(), before + 1);
}
