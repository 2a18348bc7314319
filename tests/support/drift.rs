//! `cronverb schema diff --database-url` on a database holding two overrides: the case that
//! tests/db_cli.rs (PostgreSQL) and tests/sqlite_cli.rs (SQLite) share (docs/operations.md,
//! "Changing a schedule without a build").

use std::process::Output;

use serde_json::Value;

/// The deployed code: `send_invoices` nightly in Berlin, `heartbeat` every five minutes, `cleanup`
/// hourly.
const OLD: &str = r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::send_invoices",
          "cron": { "expression": "0 2 * * *", "timezone": "Europe/Berlin" } },
        { "name": "billing::heartbeat", "cron": { "expression": "*/5 * * * *" } },
        { "name": "billing::cleanup", "cron": { "expression": "0 * * * *" } }
      ]
    }
  ]
}"#;

/// The next build moves `send_invoices` to 03:00, marks `heartbeat` fixed and removes `cleanup`.
const NEW: &str = r#"{
  "version": 1,
  "modules": [
    {
      "name": "billing",
      "verbs": [
        { "name": "billing::send_invoices",
          "cron": { "expression": "0 3 * * *", "timezone": "Europe/Berlin" } },
        { "name": "billing::heartbeat", "cron": { "expression": "*/5 * * * *", "fixed": true } }
      ]
    }
  ]
}"#;

fn ran(output: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A build of another module only: a deploy of it leaves `billing` as it is.
const ELSEWHERE: &str = r#"{
  "version": 1,
  "modules": [
    {
      "name": "shipping",
      "verbs": [ { "name": "shipping::label", "cron": { "expression": "0 * * * *" } } ]
    }
  ]
}"#;

/// Deploys [`OLD`] to the database at `url` (migrated), overrides both verbs, and checks what `schema
/// diff OLD NEW --database-url URL` says of each: the override, the code's expression before and
/// after, and what runs after the deploy (the override, or the code's where the new code marks the
/// verb `fixed`). `name` names the schema files; `cronverb` runs the tool on that database.
pub fn the_diff_shows_each_override_and_what_runs_after_the_deploy(
    url: &str,
    name: &str,
    cronverb: impl Fn(&[&str]) -> Output,
) {
    let dir = std::env::temp_dir();
    let (old, new) = (
        dir.join(format!("{name}-{}-old.json", std::process::id())),
        dir.join(format!("{name}-{}-new.json", std::process::id())),
    );
    std::fs::write(&old, OLD).unwrap();
    std::fs::write(&new, NEW).unwrap();
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    ran(&cronverb(&["deploy", "--deployment", "billing@1", old]), 0);
    let invoices = ["reschedule", "send_invoices", "*/30 * * * *"];
    ran(
        &cronverb(&[&invoices[..], &["--actor", "alice", "--note", "INC-9"]].concat()),
        0,
    );
    ran(
        &cronverb(&["reschedule", "heartbeat", "*/10 * * * *", "--actor", "bob"]),
        0,
    );
    ran(
        &cronverb(&["reschedule", "cleanup", "*/20 * * * *", "--actor", "carol"]),
        0,
    );

    // Without a database the diff is the schemas' alone.
    let text = ran(&cronverb(&["schema", "diff", old, new]), 1);
    assert!(!text.contains("overridden"), "{text}");

    let text = ran(
        &cronverb(&["schema", "diff", old, new, "--database-url", url]),
        1,
    );
    let line = |verb: &str| {
        text.lines()
            .find(|line| {
                line.trim_start()
                    .starts_with(&format!("`{verb}` is overridden"))
            })
            .unwrap_or_else(|| panic!("no line of `{verb}` in:\n{text}"))
            .trim()
            .to_owned()
    };
    let invoices = line("billing::send_invoices");
    assert!(
        invoices.starts_with(
            "`billing::send_invoices` is overridden to `*/30 * * * *` in Europe/Berlin (set by alice at "
        ) && invoices.ends_with(
            ": INC-9); its code changes from `0 2 * * *` in Europe/Berlin to `0 3 * * *` in \
             Europe/Berlin; after the deploy the override `*/30 * * * *` in Europe/Berlin still \
             runs, until `cronverb reschedule billing::send_invoices --reset`"
        ),
        "{invoices}"
    );
    let heartbeat = line("billing::heartbeat");
    assert!(
        heartbeat.ends_with(
            "its code's schedule is unchanged, `*/5 * * * *` in UTC; the new code declares it \
             `fixed`: the deploy drops the override and its code's `*/5 * * * *` in UTC runs"
        ),
        "{heartbeat}"
    );
    let cleanup = line("billing::cleanup");
    assert!(
        cleanup.ends_with(
            "the new code removes it (it declared `0 * * * *` in UTC); the new code has no such \
             verb: the deploy's takeover drops the override, and no row of it runs"
        ),
        "{cleanup}"
    );

    let json = ran(
        &cronverb(&[
            "schema",
            "diff",
            old,
            new,
            "--database-url",
            url,
            "--format",
            "json",
        ]),
        1,
    );
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["changed"].as_array().unwrap().len(), 2, "{json}");
    let overrides = json["overrides"].as_array().unwrap();
    let [cleanup, heartbeat, invoices] = &overrides[..] else {
        panic!("three overrides: {json}")
    };
    assert_eq!(cleanup["verb"], "billing::cleanup");
    assert_eq!(cleanup["after_deploy"], "removed");
    assert_eq!(cleanup["code_after"], Value::Null);
    assert_eq!(cleanup["runs"], Value::Null);
    assert_eq!(heartbeat["verb"], "billing::heartbeat");
    assert_eq!(heartbeat["by"], "bob");
    assert_eq!(heartbeat["after_deploy"], "code_drops_override");
    assert_eq!(heartbeat["runs"]["expression"], "*/5 * * * *");
    assert_eq!(invoices["verb"], "billing::send_invoices");
    assert_eq!(invoices["expression"], "*/30 * * * *");
    assert_eq!(invoices["note"], "INC-9");
    assert_eq!(invoices["code_before"]["expression"], "0 2 * * *");
    assert_eq!(invoices["code_after"]["expression"], "0 3 * * *");
    assert_eq!(invoices["after_deploy"], "override");
    assert_eq!(invoices["runs"]["expression"], "*/30 * * * *");
    assert_eq!(invoices["runs"]["timezone"], "Europe/Berlin");

    // Deploying NEW drops the fixed verb's override at its registration; the removed verb's is dropped
    // only at the deployment's takeover (a replica of it), so it is still kept: a rollback before that
    // takeover runs it.
    let deployed = ran(
        &cronverb(&["deploy", "--deployment", "billing@2", new, "--json"]),
        0,
    );
    let deployed: Value = serde_json::from_str(&deployed).unwrap();
    let dropped = &deployed["dropped_overrides"];
    assert_eq!(dropped.as_array().map(Vec::len), Some(2), "{deployed}");
    assert_eq!(dropped[0]["verb"], "billing::heartbeat", "{deployed}");
    assert_eq!(dropped[0]["reason"], "fixed", "{deployed}");
    assert_eq!(dropped[1]["verb"], "billing::cleanup", "{deployed}");
    assert_eq!(dropped[1]["reason"], "removed", "{deployed}");
    // Deployed again before its takeover: the takeover will still drop the removed verb's override.
    let again = ran(
        &cronverb(&["deploy", "--deployment", "billing@2", new, "--json"]),
        0,
    );
    let again: Value = serde_json::from_str(&again).unwrap();
    let dropped = &again["dropped_overrides"];
    assert_eq!(dropped.as_array().map(Vec::len), Some(1), "{again}");
    assert_eq!(dropped[0]["verb"], "billing::cleanup", "{again}");
    assert_eq!(dropped[0]["reason"], "removed", "{again}");
    let text = ran(
        &cronverb(&["schema", "diff", old, new, "--database-url", url]),
        1,
    );
    assert!(text.contains("`billing::cleanup` is overridden"), "{text}");
    assert!(
        !text.contains("`billing::heartbeat` is overridden"),
        "{text}"
    );

    // A schema without the module at all deploys nothing of it: no takeover drops its overrides,
    // which go on running (not `removed`).
    let elsewhere =
        std::env::temp_dir().join(format!("{name}-{}-elsewhere.json", std::process::id()));
    std::fs::write(&elsewhere, ELSEWHERE).unwrap();
    let elsewhere = elsewhere.to_str().unwrap();
    let json = ran(
        &cronverb(&[
            "schema",
            "diff",
            old,
            elsewhere,
            "--database-url",
            url,
            "--format",
            "json",
        ]),
        1,
    );
    let json: Value = serde_json::from_str(&json).unwrap();
    let overrides = json["overrides"].as_array().unwrap();
    let cleanup = overrides
        .iter()
        .find(|over| over["verb"] == "billing::cleanup")
        .unwrap_or_else(|| panic!("the override of cleanup: {json}"));
    assert_eq!(cleanup["after_deploy"], "module_not_deployed", "{json}");
    assert_eq!(cleanup["runs"]["expression"], "*/20 * * * *", "{json}");
    let text = ran(
        &cronverb(&["schema", "diff", old, elsewhere, "--database-url", url]),
        1,
    );
    assert!(
        text.contains(
            "the new schema has no module `billing`: its deploy leaves it as it is, and the \
             override `*/20 * * * *` in UTC still runs"
        ),
        "{text}"
    );
    let _ = std::fs::remove_file(elsewhere);
    let _ = std::fs::remove_file(old);
    let _ = std::fs::remove_file(new);
}
