//! The `cronverb` command-line tool, run as a user or a script runs it: exit status, standard output and
//! standard error.
#![cfg(feature = "cli")]

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

/// Runs `cronverb next` and returns its lines, asserting that it succeeded.
fn next(args: &[&str]) -> Vec<String> {
    let mut full = vec!["next"];
    full.extend_from_slice(args);
    let output = cronverb(&full);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stderr(&output), "");
    stdout(&output).lines().map(str::to_owned).collect()
}

#[test]
fn check_accepts_a_valid_expression_and_shows_its_next_occurrences() {
    let output = cronverb(&[
        "check",
        "0  2 * * *",
        "--timezone",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "0 2 * * * America/New_York\n\
         valid fixed-time schedule in America/New_York\n\
         next occurrences after 2026-03-07T12:00:00Z:\n\
         \x20 2026-03-08T07:00:00Z  2026-03-08T03:00:00-04:00 EDT\n\
         \x20 2026-03-09T06:00:00Z  2026-03-09T02:00:00-04:00 EDT\n\
         \x20 2026-03-10T06:00:00Z  2026-03-10T02:00:00-04:00 EDT\n\
         \x20 2026-03-11T06:00:00Z  2026-03-11T02:00:00-04:00 EDT\n\
         \x20 2026-03-12T06:00:00Z  2026-03-12T02:00:00-04:00 EDT\n"
    );
}

#[test]
fn check_in_utc_shows_utc_instants_only() {
    let output = cronverb(&["check", "*/15 * * * *", "--after", "2026-01-01T00:00:00Z"]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let lines: Vec<&str> = stdout(&output).lines().collect();
    assert_eq!(lines[0], "*/15 * * * *");
    assert_eq!(lines[1], "valid interval schedule in UTC");
    assert_eq!(lines[3], "  2026-01-01T00:15:00Z");
    assert_eq!(lines.len(), 3 + 5);
}

#[test]
fn check_points_at_the_offending_text() {
    let output = cronverb(&["check", "0 9 * * MON"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "error: `MON` is not supported in the day-of-week field; write `1` instead\n\
         \x20 |\n\
         1 | 0 9 * * MON\n\
         \x20 |         ^^^\n"
    );
}

#[test]
fn check_carets_line_up_after_a_tab() {
    let output = cronverb(&["check", "0\t9 * * MON"]);
    assert_eq!(output.status.code(), Some(2));
    let lines: Vec<&str> = stderr(&output).lines().collect();
    assert_eq!(lines[2], "1 | 0    9 * * MON");
    assert_eq!(lines[3], "  |            ^^^");
}

#[test]
fn check_rejects_invalid_expressions_with_status_2_and_a_caret() {
    for expression in [
        "*/0 * * * *",
        "0 0 30 2 *",
        "5-1 * * * *",
        "* * *",
        "0 0 * * * ? *",
        "61 * * * *",
    ] {
        let output = cronverb(&["check", expression]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "`{expression}` must be rejected"
        );
        assert_eq!(stdout(&output), "", "`{expression}`");
        let error = stderr(&output);
        assert!(error.starts_with("error: "), "`{expression}`: {error}");
        assert!(
            error.contains(&format!("1 | {expression}\n")),
            "`{expression}`: {error}"
        );
        assert!(
            error.lines().nth(3).is_some_and(|l| l.contains('^')),
            "`{expression}`: {error}"
        );
    }
}

#[test]
fn unknown_zone_is_a_usage_error_with_a_suggestion() {
    for subcommand in ["check", "next"] {
        let output = cronverb(&[subcommand, "0 2 * * *", "--timezone", "America/New_Yrok"]);
        assert_eq!(output.status.code(), Some(2), "{subcommand}");
        assert!(
            stderr(&output)
                .contains("unknown time zone `America/New_Yrok`; did you mean `America/New_York`?"),
            "{subcommand}: {}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "");
    }
}

/// Names in the IANA database that a user may not mean are refused with the zone to write instead
/// (docs/expressions.md, "Names a user may not mean"); a fixed offset on purpose is an `Etc` zone.
#[test]
fn a_zone_a_user_may_not_mean_is_a_usage_error_that_says_what_to_write() {
    for subcommand in ["check", "next"] {
        for (zone, instead) in [
            (
                "EST",
                "write `America/New_York`, or `Etc/GMT+5` for a fixed UTC−05:00 on purpose",
            ),
            ("PST8PDT", "write `America/Los_Angeles`"),
            (
                "CET",
                "write a city of the zone you mean, such as `Europe/Paris` or `Europe/Berlin`",
            ),
        ] {
            let output = cronverb(&[subcommand, "0 2 * * *", "--timezone", zone]);
            assert_eq!(output.status.code(), Some(2), "{subcommand} {zone}");
            assert!(
                stderr(&output).contains(&format!("time zone `{zone}` "))
                    && stderr(&output).contains(instead),
                "{subcommand} {zone}: {}",
                stderr(&output)
            );
            assert_eq!(stdout(&output), "");
        }
    }
    assert_eq!(
        next(&[
            "0 9 * * *",
            "--timezone",
            "Etc/GMT+5",
            "--after",
            "2026-01-01T00:00:00Z",
            "-n",
            "1"
        ]),
        ["2026-01-01T14:00:00Z"]
    );
}

/// `cronverb deploy` validates a schema with the attribute's rules: a zone a user may not mean, a timeout
/// in days or beyond a year are refused there too (here on a SQLite file, which needs no server).
#[test]
fn deploy_refuses_a_zone_a_user_may_not_mean_and_a_timeout_beyond_a_year() {
    let base = std::env::temp_dir().join(format!("cronverb-cli-refused-{}", std::process::id()));
    let url = format!("sqlite://{}.db", base.display());
    let migrated = cronverb(&["migrate", "--database-url", &url]);
    assert_eq!(migrated.status.code(), Some(0), "{}", stderr(&migrated));
    let schema = base.with_extension("json");
    for (cron, refused) in [
        (
            r#"{"expression":"0 2 * * *","timezone":"EST"}"#,
            "time zone `EST` is UTC−05:00 all year",
        ),
        (
            r#"{"expression":"0 2 * * *","timeout":"18446744073709551615s"}"#,
            "duration `18446744073709551615s` is too long; it must be at most `8760h` (365 days)",
        ),
        (
            r#"{"expression":"0 2 * * *","timeout":"1d"}"#,
            "invalid duration `1d`; days are written in hours: `24h`",
        ),
    ] {
        std::fs::write(
            &schema,
            format!(
                r#"{{"version":1,"modules":[{{"name":"billing","verbs":[{{"name":"billing::nightly","cron":{cron}}}]}}]}}"#
            ),
        )
        .unwrap();
        let output = cronverb(&[
            "deploy",
            "--deployment",
            "billing@1",
            schema.to_str().unwrap(),
            "--database-url",
            &url,
        ]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains(refused), "{}", stderr(&output));
    }
    for path in [schema, base.with_extension("db")] {
        std::fs::remove_file(path).unwrap();
    }
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}.db{suffix}", base.display()));
    }
}

/// The first line of `--help` says what the tool is, not only its first command.
#[test]
fn help_says_what_the_tool_is() {
    let output = cronverb(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output).lines().next(),
        Some(
            "Check cron expressions, and deploy, inspect, pause, resume, trigger, cancel, reschedule and \
             backfill the scheduled jobs of applications built with cronverb, and read who did; serve their \
             dashboard"
        )
    );
}

#[test]
fn next_lists_utc_instants_one_per_line() {
    assert_eq!(
        next(&["*/15 * * * *", "--after", "2026-01-01T00:07:30Z", "-n", "3"]),
        [
            "2026-01-01T00:15:00Z",
            "2026-01-01T00:30:00Z",
            "2026-01-01T00:45:00Z"
        ]
    );
    // An offset in `--after` is an instant like any other.
    assert_eq!(
        next(&[
            "0 0 * * *",
            "--after",
            "2026-01-01T01:00:00+02:00",
            "-n",
            "1"
        ]),
        ["2026-01-01T00:00:00Z"]
    );
}

#[test]
fn next_defaults_to_ten_occurrences() {
    assert_eq!(next(&["0 * * * *"]).len(), 10);
}

#[test]
fn next_in_new_york_across_spring_forward() {
    // 2026-03-08 02:00 does not exist in New York: the fixed-time job runs once, at 03:00 EDT.
    assert_eq!(
        next(&[
            "0 2 * * *",
            "--timezone",
            "America/New_York",
            "--after",
            "2026-03-06T12:00:00Z",
            "-n",
            "3"
        ]),
        [
            "2026-03-07T07:00:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:00:00Z"
        ]
    );
    // An interval job has no occurrence inside the gap.
    assert_eq!(
        next(&[
            "*/30 1-3 * * *",
            "--timezone",
            "America/New_York",
            "--after",
            "2026-03-08T05:00:00Z",
            "-n",
            "5"
        ]),
        [
            "2026-03-08T06:00:00Z",
            "2026-03-08T06:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
            "2026-03-09T05:00:00Z"
        ]
    );
}

#[test]
fn next_in_new_york_across_fall_back() {
    // 2026-11-01 01:30 happens twice in New York: a fixed-time job runs at the first one only.
    assert_eq!(
        next(&[
            "30 1 * * *",
            "--timezone",
            "America/New_York",
            "--after",
            "2026-10-31T12:00:00Z",
            "-n",
            "2"
        ]),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
    // An interval job runs in both passes.
    assert_eq!(
        next(&[
            "*/30 1 * * *",
            "--timezone",
            "America/New_York",
            "--after",
            "2026-11-01T04:00:00Z",
            "-n",
            "4"
        ]),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:30:00Z"
        ]
    );
}

#[test]
fn next_prints_fewer_lines_when_the_schedule_ends() {
    assert_eq!(
        next(&[
            "0 0 0 1 1 * 2099",
            "--after",
            "2026-01-01T00:00:00Z",
            "-n",
            "3"
        ]),
        ["2099-01-01T00:00:00Z"]
    );
    assert_eq!(
        next(&["0 0 0 1 1 * 2099", "--after", "2099-01-01T00:00:00Z"]),
        Vec::<String>::new()
    );
}

#[test]
fn next_rejects_a_bad_after_with_status_2() {
    for after in ["yesterday", "2026-03-08", "2026-03-08T07:00:00"] {
        let output = cronverb(&["next", "0 2 * * *", "--after", after]);
        assert_eq!(output.status.code(), Some(2), "--after {after}");
        assert!(stderr(&output).contains("RFC 3339"), "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn next_rejects_a_bad_expression_with_status_2() {
    let output = cronverb(&["next", "0 9 * * MON"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("  |         ^^^\n"),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "");
}

#[test]
fn usage_errors_exit_with_status_2() {
    assert_eq!(cronverb(&[]).status.code(), Some(2));
    assert_eq!(cronverb(&["next"]).status.code(), Some(2));
    assert_eq!(
        cronverb(&["next", "* * * * *", "-n", "many"]).status.code(),
        Some(2)
    );
    assert_eq!(cronverb(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn next_with_a_jitter_prints_the_jobs_starts_and_says_its_offset() {
    let output = cronverb(&[
        "next",
        "0 0 * * *",
        "--after",
        "2026-01-01T00:00:00Z",
        "-n",
        "2",
        "--jitter",
        "10m",
        "--verb",
        "billing::nightly_report",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The offset pinned in cron-schema (`jitter::tests`): 109,883 ms, the module the verb's first
    // segment.
    assert_eq!(
        stdout(&output),
        "2026-01-02T00:01:49.883Z\n2026-01-03T00:01:49.883Z\n"
    );
    assert_eq!(
        stderr(&output),
        "`billing::nightly_report` of module `billing` with jitter 10m: each occurrence starts \
         1m49.883s after its instant\n"
    );
    // A jitter the schedule cannot take, or one without a verb, is refused.
    let output = cronverb(&[
        "next",
        "*/5 * * * *",
        "--jitter",
        "5m",
        "--verb",
        "app::sweep",
    ]);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("must be shorter than the shortest interval"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        cronverb(&["next", "0 0 * * *", "--jitter", "10m"])
            .status
            .code(),
        Some(2)
    );
}
