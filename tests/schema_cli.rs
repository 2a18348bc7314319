#![cfg(feature = "cli")]
//! `cronverb schema extract` and `cronverb schema diff`, run as deploy tooling runs them: exit status,
//! standard output and standard error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cronverb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(args)
        .output()
        .expect("the cronverb binary runs")
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("standard output is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("standard error is UTF-8")
}

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronverb-schema-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a package of its own (its own workspace) with the given files.
fn package(test: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = scratch(test);
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"billing-app\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Every example that declares `#[cron]` jobs prints its schema with `--emit-schema`, and extraction
/// gives the same JSON, byte for byte. An example without jobs (a benchmark driver) has an empty schema.
#[test]
fn extraction_agrees_with_the_registry_of_every_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("Cargo.toml");
    let mut examples: Vec<(String, String)> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_stem()?.to_str()?.to_owned();
            (path.extension()? == "rs").then(|| (name, std::fs::read_to_string(&path).unwrap()))
        })
        .collect();
    examples.sort();
    assert!(examples.iter().any(|(name, _)| name == "quickstart"));

    for (example, source) in examples {
        let extracted = cronverb(&[
            "schema",
            "extract",
            "--manifest-path",
            path(&manifest),
            "--example",
            &example,
            "--format",
            "json",
        ]);
        assert_eq!(
            extracted.status.code(),
            Some(0),
            "{example}: {}",
            stderr(&extracted)
        );
        let schema: serde_json::Value = serde_json::from_str(stdout(&extracted)).unwrap();
        if !source.contains("#[cron(") {
            assert_eq!(schema["modules"], serde_json::json!([]), "{example}");
            continue;
        }
        assert!(
            !schema["modules"].as_array().unwrap().is_empty(),
            "{example} declares jobs"
        );

        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let emitted = Command::new(cargo)
            .args(["run", "--quiet", "--example", &example, "--manifest-path"])
            .arg(&manifest)
            .args(["--", "--emit-schema"])
            .output()
            .unwrap();
        assert!(emitted.status.success(), "{example}: {}", stderr(&emitted));
        assert_eq!(stdout(&extracted), stdout(&emitted), "{example}");
    }
}

#[test]
fn extraction_follows_modules_and_names_verbs_as_the_registry_does() {
    let dir = package(
        "modules",
        &[
            (
                "src/lib.rs",
                "mod billing;\n#[path = \"elsewhere/audit_jobs.rs\"]\nmod audit;\n\n\
                 pub mod inline {\n    /// Inline.\n    #[cronverb::cron(\"0 1 * * *\")]\n    pub async fn inner() {}\n}\n\n\
                 #[cfg(test)]\nmod tests {\n    #[cron(\"0 9 * * *\")]\n    async fn not_in_a_build() {}\n}\n",
            ),
            (
                "src/billing/mod.rs",
                "mod ledger;\n\n/// Sends yesterday's invoices.\n#[cron(\"0 2 * * *\", timezone = \"Europe/Berlin\", timeout = \"10m\")]\n\
                 async fn send_invoices() -> Result<(), String> {\n    Ok(())\n}\n",
            ),
            (
                "src/billing/ledger.rs",
                "#[cron(\"0 0 1 * *\", missed = \"skip\", name = \"ledger-close\")]\nasync fn r#close() {}\n",
            ),
            (
                "src/elsewhere/audit_jobs.rs",
                "#[cron(\"*/15 * * * *\", retries = 2, backoff = \"1m\", lease = \"20s\")]\nasync fn sweep() {}\n",
            ),
            (
                "src/bin/billing-worker.rs",
                "#[cron(\"30 0 3 * * *\", on = \"every_replica\")]\nasync fn heartbeat() {}\nfn main() {}\n",
            ),
            (
                "examples/demo.rs",
                "#[cron(\"* * * * *\")]\nasync fn demo() {}\nfn main() {}\n",
            ),
        ],
    );
    let manifest = dir.join("Cargo.toml");
    let output = cronverb(&["schema", "extract", "--manifest-path", path(&manifest)]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    // Sorted by full name: `ledger-close` (set with `name =`) comes after `billing_app::…`.
    assert_eq!(
        stdout(&output),
        "\
module billing_app {
  verb audit::sweep(Unit) Unit
    +cron */15 * * * * retries=2 backoff=1m lease=20s

  // Sends yesterday's invoices.
  verb billing::send_invoices(Unit) Unit
    +cron 0 2 * * * Europe/Berlin timeout=10m

  // Inline.
  verb inline::inner(Unit) Unit
    +cron 0 1 * * *

  verb ::ledger-close(Unit) Unit
    +cron 0 0 1 * * missed=skip
}

module billing_worker {
  verb heartbeat(Unit) Unit
    +cron 30 0 3 * * * on=every_replica
}
"
    );

    let output = cronverb(&[
        "schema",
        "extract",
        "--manifest-path",
        path(&manifest),
        "--format",
        "json",
        "--example",
        "demo",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let schema: serde_json::Value = serde_json::from_str(stdout(&output)).unwrap();
    assert_eq!(
        schema,
        serde_json::json!({
            "version": 1,
            "modules": [{"name": "demo", "verbs": [{
                "name": "demo::demo",
                "cron": {"expression": "* * * * *", "missed": "once"},
                "source": {"file": "examples/demo.rs", "line": 2},
            }]}],
        })
    );

    let output = cronverb(&[
        "schema",
        "extract",
        "--manifest-path",
        path(&manifest),
        "--lib",
        "--format",
        "json",
    ]);
    let schema: serde_json::Value = serde_json::from_str(stdout(&output)).unwrap();
    let invoices = &schema["modules"][0]["verbs"][1];
    assert_eq!(invoices["name"], "billing_app::billing::send_invoices");
    assert_eq!(
        invoices["source"],
        serde_json::json!({"file": "src/billing/mod.rs", "line": 5})
    );
    assert_eq!(invoices["doc"], "Sends yesterday's invoices.");
}

#[test]
fn an_invalid_attribute_is_reported_where_it_is_with_the_compilers_message() {
    let dir = package(
        "invalid",
        &[
            ("src/lib.rs", "mod jobs;\n"),
            (
                "src/jobs.rs",
                "use cronverb::cron;\n\n#[cron(\"0 9 * * MON\")]\nasync fn weekly() {}\n\n\
                 #[cron(\"* * * * *\", tz = \"UTC\")]\nfn not_async() {}\n",
            ),
        ],
    );
    let output = cronverb(&[
        "schema",
        "extract",
        "--manifest-path",
        path(&dir.join("Cargo.toml")),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "src/jobs.rs:3:17: invalid cron expression: `MON` is not supported in the day-of-week field; write `1` instead\n\
         src/jobs.rs:6:21: unknown `#[cron]` argument `tz` (did you mean `timezone`?); expected one of: `timezone`, `timeout`, `name`, `missed`, `catch_up`, `retries`, `backoff`, `lease`, `on`, `jitter`, `expect_within`, `fixed`, `crate`\n\
         src/jobs.rs:7:1: the `async` keyword is missing from the function declaration\n"
    );
}

#[test]
fn a_missing_module_file_or_manifest_is_an_error() {
    let dir = package("missing", &[("src/lib.rs", "mod gone;\n")]);
    let output = cronverb(&[
        "schema",
        "extract",
        "--manifest-path",
        path(&dir.join("Cargo.toml")),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with(
            "src/lib.rs:1:5: file not found for module `gone`: cannot read `src/gone/mod.rs`"
        ),
        "{}",
        stderr(&output)
    );

    let missing = dir.join("nowhere/Cargo.toml");
    let output = cronverb(&["schema", "extract", "--manifest-path", path(&missing)]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!("error: manifest `{}` does not exist\n", missing.display())
    );
}

const OLD: &str = r#"{"version": 1, "modules": [{"name": "billing", "verbs": [
    {"name": "billing::send_invoices", "cron": {"expression": "0 2 * * *", "timezone": "Europe/Berlin"}},
    {"name": "billing::sweep", "cron": {"expression": "*/15 * * * *"}}
]}]}"#;

const NEW: &str = r#"{"version": 1, "modules": [{"name": "billing", "verbs": [
    {"name": "billing::send_invoices", "cron": {"expression": "0 3 * * *", "timezone": "Europe/Berlin", "timeout": "10m"}},
    {"name": "billing::refunds", "cron": {"expression": "0 * * * *", "missed": "skip"}}
]}]}"#;

fn schema_files(test: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(test);
    let (old, new) = (dir.join("old.json"), dir.join("new.json"));
    std::fs::write(&old, OLD).unwrap();
    std::fs::write(&new, NEW).unwrap();
    (old, new)
}

#[test]
fn diff_of_equal_schemas_exits_0() {
    let (old, _) = schema_files("equal");
    let text = old.with_file_name("old.txt");
    std::fs::write(
        &text,
        "module billing {\n  verb send_invoices(Unit) Unit\n    +cron 0 2 * * * Europe/Berlin\n\n  \
         verb sweep(Unit) Unit\n    +cron */15 * * * *\n}\n",
    )
    .unwrap();
    for (a, b) in [(&old, &old), (&old, &text)] {
        let output = cronverb(&["schema", "diff", path(a), path(b)]);
        assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn diff_lists_the_differences_and_exits_1() {
    let (old, new) = schema_files("differ");
    let output = cronverb(&["schema", "diff", path(&old), path(&new)]);
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
+ billing billing::refunds: 0 * * * * missed=skip
- billing billing::sweep: */15 * * * *
~ billing billing::send_invoices: expression `0 2 * * *` -> `0 3 * * *`, timeout the default -> `10m`
"
    );
    assert_eq!(stderr(&output), "");

    let output = cronverb(&["schema", "diff", path(&old), path(&new), "--format", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let diff: serde_json::Value = serde_json::from_str(stdout(&output)).unwrap();
    assert_eq!(diff["added"][0]["name"], "billing::refunds");
    assert_eq!(diff["removed"][0]["name"], "billing::sweep");
    assert_eq!(
        diff["changed"][0]["changes"],
        serde_json::json!([
            {"field": "expression", "old": "0 2 * * *", "new": "0 3 * * *"},
            {"field": "timeout", "old": null, "new": "10m"},
        ])
    );
}

#[test]
fn diff_refuses_a_file_that_is_not_a_schema_naming_it() {
    let (old, _) = schema_files("not-json");
    let garbage = old.with_file_name("garbage.json");
    std::fs::write(&garbage, "{\"version\": 1, \"modules\": [").unwrap();
    let output = cronverb(&["schema", "diff", path(&old), path(&garbage)]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        format!(
            "error: `{}` is not a valid cronverb schema: invalid JSON: EOF while parsing a list at line 1 column 27\n",
            garbage.display()
        )
    );

    let prose = old.with_file_name("notes.txt");
    std::fs::write(&prose, "these are not the jobs\n").unwrap();
    let output = cronverb(&["schema", "diff", path(&prose), path(&old)]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!(
            "error: `{}` is not JSON, nor a cronverb schema in the text form: line 1: expected `module <name> {{`, found `these are not the jobs`\n",
            prose.display()
        )
    );
}

#[test]
fn diff_refuses_a_missing_file_naming_it() {
    let (old, _) = schema_files("missing-file");
    let missing = old.with_file_name("missing.json");
    let output = cronverb(&["schema", "diff", path(&old), path(&missing)]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!(
            "error: cannot read schema file `{}`: ",
            missing.display()
        )),
        "{message}"
    );
}

#[test]
fn diff_refuses_a_verb_listed_twice_as_deploy_does() {
    let (old, _) = schema_files("listed-twice");
    let twice = old.with_file_name("twice.json");
    std::fs::write(
        &twice,
        r#"{"version": 1, "modules": [{"name": "billing", "verbs": [
            {"name": "billing::sweep", "cron": {"expression": "*/15 * * * *"}},
            {"name": "billing::sweep", "cron": {"expression": "0 * * * *"}}
        ]}]}"#,
    )
    .unwrap();
    for args in [[path(&old), path(&twice)], [path(&twice), path(&old)]] {
        let output = cronverb(&["schema", "diff", args[0], args[1]]);
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
        assert_eq!(stdout(&output), "");
        assert_eq!(
            stderr(&output),
            format!(
                "error: `{}` is not a valid cronverb schema: verb `billing::sweep` is listed twice\n",
                twice.display()
            )
        );
    }

    // `deploy` refuses the same file with the same words.
    let database = old.with_file_name("cron.db");
    let url = format!("sqlite://{}", database.display());
    let output = cronverb(&["migrate", "--database-url", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = cronverb(&[
        "deploy",
        "--database-url",
        &url,
        "--deployment",
        "billing@1",
        path(&twice),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert_eq!(
        stderr(&output),
        "error: invalid schema: verb `billing::sweep` is listed twice\n"
    );
}

/// A database that fails (nothing listens, no such SQLite file) is not a difference: the diff exits 2,
/// as for a bad URL, with the error on standard error and nothing on standard output, whether the
/// schemas differ or not (docs/operations.md, "Changing a schedule without a build").
#[test]
fn diff_with_a_database_that_fails_exits_2() {
    let (old, new) = schema_files("unreachable");
    let missing = old.with_file_name("missing.db");
    let missing = format!("sqlite://{}", missing.display());
    for url in ["postgres://postgres@127.0.0.1:1/x", missing.as_str()] {
        for (a, b) in [(&old, &old), (&old, &new)] {
            let output = cronverb(&["schema", "diff", path(a), path(b), "--database-url", url]);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{url}: stdout: {}\nstderr: {}",
                stdout(&output),
                stderr(&output)
            );
            assert_eq!(stdout(&output), "", "{url}");
            assert!(
                stderr(&output).starts_with("error: "),
                "{url}: {}",
                stderr(&output)
            );
        }
    }
}
