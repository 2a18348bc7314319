//! The schema types: the text form, the JSON form, the diff, and (with the `syn` feature) the attribute
//! parser that the macro and `cronverb schema extract` share.

use cron_schema::{Cron, MissedPolicy, RunOn, Schema, SchemaError, Verb};

fn billing() -> Schema {
    Schema::new([
        (
            "billing",
            Verb::new(
                "billing::send_invoices",
                Cron::new("0 2 * * *")
                    .timezone("Europe/Berlin")
                    .timeout("10m"),
            )
            .doc("Sends yesterday's invoices.\n\nTo every customer.")
            .source("src/lib.rs", 4),
        ),
        (
            "billing",
            Verb::new(
                "billing::ledger::close",
                Cron::new("0 0 1 * *").missed(MissedPolicy::Skip),
            )
            .source("src/ledger.rs", 12),
        ),
        (
            "billing",
            Verb::new("nightly", Cron::new("30 0 3 * * *")).source("src/lib.rs", 20),
        ),
        (
            "audit",
            Verb::new("audit::sweep", Cron::new("*/15 * * * *")).source("src/main.rs", 7),
        ),
    ])
}

#[test]
fn text_form_is_sorted_and_shows_only_what_is_not_default() {
    assert_eq!(
        billing().to_string(),
        "\
module audit {
  verb sweep(Unit) Unit
    +cron */15 * * * *
}

module billing {
  verb ledger::close(Unit) Unit
    +cron 0 0 1 * * missed=skip

  // Sends yesterday's invoices.
  //
  // To every customer.
  verb send_invoices(Unit) Unit
    +cron 0 2 * * * Europe/Berlin timeout=10m

  verb ::nightly(Unit) Unit
    +cron 30 0 3 * * *
}
"
    );
}

#[test]
fn text_form_reads_back_without_source_locations() {
    let schema = billing();
    let mut expected = schema.clone();
    for module in &mut expected.modules {
        for verb in &mut module.verbs {
            verb.source = None;
        }
    }
    assert_eq!(Schema::from_text(&schema.to_string()).unwrap(), expected);
}

#[test]
fn json_form_has_a_version_and_round_trips() {
    let schema = billing();
    let json = schema.to_json();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["version"], 1);
    assert_eq!(value["modules"][1]["name"], "billing");
    let invoices = &value["modules"][1]["verbs"][1];
    assert_eq!(invoices["name"], "billing::send_invoices");
    assert_eq!(
        invoices["cron"],
        serde_json::json!({
            "expression": "0 2 * * *",
            "timezone": "Europe/Berlin",
            "timeout": "10m",
            "missed": "once",
        })
    );
    assert_eq!(
        invoices["source"],
        serde_json::json!({"file": "src/lib.rs", "line": 4})
    );
    // No timeout, zone or doc: the keys are absent.
    let sweep = &value["modules"][0]["verbs"][0];
    assert_eq!(
        sweep["cron"],
        serde_json::json!({"expression": "*/15 * * * *", "missed": "once"})
    );
    assert!(sweep.get("doc").is_none());

    assert_eq!(Schema::from_json(&json).unwrap(), schema);
    assert_eq!(
        serde_json::from_str::<Schema>(&json).unwrap(),
        schema,
        "plain serde reads it too"
    );
}

#[test]
fn reading_sorts_what_a_tool_wrote_in_another_order() {
    let json = r#"{"version": 1, "modules": [
        {"name": "b", "verbs": [{"name": "b::z", "cron": {"expression": "* * * * *"}},
                                {"name": "b::a", "cron": {"expression": "* * * * *"}}]},
        {"name": "a", "verbs": []}]}"#;
    let schema = Schema::from_json(json).unwrap();
    let names: Vec<&str> = schema.verbs().map(|(_, verb)| verb.name.as_str()).collect();
    assert_eq!(names, ["b::a", "b::z"]);
    assert_eq!(schema.modules[0].name, "a");
}

#[test]
fn another_version_and_bad_json_are_refused() {
    let error = Schema::from_json(r#"{"version": 2, "modules": []}"#).unwrap_err();
    assert!(matches!(error, SchemaError::Version { found: 2 }));
    assert_eq!(
        error.to_string(),
        "schema version 2 is not supported; this build reads version 1"
    );

    let error = Schema::from_json("{\"modules\": []}").unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid JSON: missing field `version` at line 1 column 15"
    );
    assert!(Schema::from_json("not json").is_err());
}

#[test]
fn bad_text_is_refused_with_its_line() {
    let cases = [
        ("hello\n", 1, "expected `module <name> {`, found `hello`"),
        (
            "module a {\n  verb x(Unit) Unit\n}\n",
            2,
            "verb `a::x` has no `+cron` line",
        ),
        (
            "module a {\n  verb x(Unit) Unit\n    +cron 0 2 * * * missed=never\n}\n",
            3,
            "unknown missed-run policy `never`; expected `once`, `skip` or `all`",
        ),
        (
            "module a {\n  verb x(Unit) Unit\n    +cron * * * * *\n",
            3,
            "module `a` is not closed with `}`",
        ),
    ];
    for (text, line, message) in cases {
        match Schema::from_text(text) {
            Err(SchemaError::Text {
                line: l,
                message: m,
            }) => {
                assert_eq!((l, m.as_str()), (line, message), "{text}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn either_form_is_read() {
    let schema = billing();
    assert_eq!(
        Schema::from_json_or_text(&schema.to_json()).unwrap(),
        schema
    );
    assert_eq!(
        Schema::from_json_or_text(&schema.to_string())
            .unwrap()
            .diff(&schema),
        Default::default()
    );
}

#[test]
fn diff_lists_added_removed_and_changed_verbs() {
    let old = billing();
    assert!(old.diff(&old).is_empty());

    let new = Schema::new([
        (
            "billing",
            // Same timeout written differently, zone moved, doc and line changed: only the zone counts.
            Verb::new(
                "billing::send_invoices",
                Cron::new("0  2 * * *")
                    .timezone("Europe/Paris")
                    .timeout("600s"),
            )
            .doc("Another doc.")
            .source("src/invoices.rs", 40),
        ),
        (
            "billing",
            Verb::new("billing::ledger::close", Cron::new("0 0 2 * *")),
        ),
        (
            "billing",
            Verb::new("nightly", Cron::new("30 0 3 * * *").timeout("1m")),
        ),
        (
            "billing",
            Verb::new("billing::refunds", Cron::new("0 * * * *")),
        ),
    ]);
    let diff = old.diff(&new);
    assert!(!diff.is_empty());
    assert_eq!(
        diff.to_string(),
        "\
+ billing billing::refunds: 0 * * * *
- audit audit::sweep: */15 * * * *
~ billing billing::ledger::close: expression `0 0 1 * *` -> `0 0 2 * *`, missed `skip` -> `once`
~ billing billing::send_invoices: timezone `Europe/Berlin` -> `Europe/Paris`
~ billing nightly: timeout the default -> `1m`
"
    );

    let json = serde_json::to_value(&diff).unwrap();
    assert_eq!(json["added"][0]["module"], "billing");
    assert_eq!(json["added"][0]["name"], "billing::refunds");
    assert_eq!(json["added"][0]["cron"]["expression"], "0 * * * *");
    assert_eq!(json["removed"][0]["name"], "audit::sweep");
    assert_eq!(
        json["changed"][2],
        serde_json::json!({
            "module": "billing",
            "name": "nightly",
            "changes": [{"field": "timeout", "old": null, "new": "1m"}],
        })
    );
}

#[test]
fn utc_named_or_implied_is_the_same_zone() {
    let implied = Schema::new([("a", Verb::new("a::x", Cron::new("* * * * *")))]);
    let named = Schema::new([(
        "a",
        Verb::new("a::x", Cron::new("* * * * *").timezone("UTC")),
    )]);
    assert!(implied.diff(&named).is_empty());
}

/// A schema using `retries`, `backoff` and `on`.
fn retrying() -> Schema {
    Schema::new([
        (
            "billing",
            Verb::new(
                "billing::send_invoices",
                Cron::new("0 2 * * *")
                    .timeout("10m")
                    .retries(3)
                    .backoff("30s"),
            ),
        ),
        (
            "billing",
            Verb::new(
                "billing::refresh_cache",
                Cron::new("*/5 * * * *").on(RunOn::EveryReplica),
            ),
        ),
    ])
}

#[test]
fn retries_backoff_and_on_are_in_both_forms_only_when_set() {
    let schema = retrying();
    assert_eq!(
        schema.to_string(),
        "\
module billing {
  verb refresh_cache(Unit) Unit
    +cron */5 * * * * on=every_replica

  verb send_invoices(Unit) Unit
    +cron 0 2 * * * timeout=10m retries=3 backoff=30s
}
"
    );
    assert_eq!(Schema::from_text(&schema.to_string()).unwrap(), schema);

    let json = schema.to_json();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        value["modules"][0]["verbs"][0]["cron"],
        serde_json::json!({
            "expression": "*/5 * * * *",
            "missed": "once",
            "on": "every_replica",
        })
    );
    assert_eq!(
        value["modules"][0]["verbs"][1]["cron"],
        serde_json::json!({
            "expression": "0 2 * * *",
            "timeout": "10m",
            "missed": "once",
            "retries": 3,
            "backoff": "30s",
        })
    );
    assert_eq!(Schema::from_json(&json).unwrap(), schema);

    // At their defaults, the fields are left out, as a schema written before they existed has them.
    let plain = Schema::new([("a", Verb::new("a::x", Cron::new("* * * * *").retries(0)))]);
    assert!(!plain.to_json().contains("retries"));
    assert!(!plain.to_json().contains("\"on\""));
    assert_eq!(
        plain.to_string(),
        "module a {\n  verb x(Unit) Unit\n    +cron * * * * *\n}\n"
    );
}

#[test]
fn a_schema_written_before_retries_and_on_reads_with_their_defaults() {
    let old = r#"{
  "version": 1,
  "modules": [
    { "name": "billing", "verbs": [
      { "name": "billing::send_invoices", "cron": { "expression": "0 2 * * *", "missed": "skip" } }
    ] }
  ]
}"#;
    let schema = Schema::from_json(old).unwrap();
    let cron = &schema.modules[0].verbs[0].cron;
    assert_eq!(cron.retries, 0);
    assert_eq!(cron.backoff, None);
    assert_eq!(cron.on, RunOn::OneReplica);
    assert_eq!(
        cron,
        &Cron::new("0 2 * * *").missed(MissedPolicy::Skip),
        "the same job as one declared without them"
    );
}

#[test]
fn bad_retries_and_on_in_the_text_form_are_refused() {
    for (cron, message) in [
        (
            "0 2 * * * retries=many",
            "line 3: `retries=many` is not a number of retries; expected such as `retries=3`",
        ),
        (
            "0 2 * * * on=all",
            "line 3: unknown `on` value `all`; expected `one_replica` or `every_replica`",
        ),
    ] {
        let text = format!("module a {{\n  verb x(Unit) Unit\n    +cron {cron}\n}}\n");
        let error = Schema::from_text(&text).unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn diff_reports_retries_backoff_and_on() {
    let old = retrying();
    // The same backoff written another way is no change.
    let respelled = Schema::new([
        (
            "billing",
            Verb::new(
                "billing::send_invoices",
                Cron::new("0 2 * * *")
                    .timeout("10m")
                    .retries(3)
                    .backoff("0m30s"),
            ),
        ),
        (
            "billing",
            Verb::new(
                "billing::refresh_cache",
                Cron::new("*/5 * * * *").on(RunOn::EveryReplica),
            ),
        ),
    ]);
    assert!(old.diff(&respelled).is_empty());

    let new = Schema::new([
        (
            "billing",
            Verb::new(
                "billing::send_invoices",
                Cron::new("0 2 * * *")
                    .timeout("10m")
                    .retries(5)
                    .backoff("1m"),
            ),
        ),
        (
            "billing",
            Verb::new("billing::refresh_cache", Cron::new("*/5 * * * *")),
        ),
    ]);
    let diff = old.diff(&new);
    assert_eq!(
        diff.to_string(),
        "\
~ billing billing::refresh_cache: on `every_replica` -> `one_replica`
~ billing billing::send_invoices: retries `3` -> `5`, backoff `30s` -> `1m`
"
    );
    let json = serde_json::to_value(&diff).unwrap();
    assert_eq!(
        json["changed"][1]["changes"],
        serde_json::json!([
            {"field": "retries", "old": "3", "new": "5"},
            {"field": "backoff", "old": "30s", "new": "1m"},
        ])
    );
    // Added and removed verbs show them as the text form does.
    let diff = Schema::new([("a", Verb::new("a::x", Cron::new("* * * * *")))]).diff(&old);
    assert_eq!(
        diff.to_string(),
        "\
+ billing billing::refresh_cache: */5 * * * * on=every_replica
+ billing billing::send_invoices: 0 2 * * * timeout=10m retries=3 backoff=30s
- a a::x: * * * * *
"
    );
}

#[test]
fn a_lease_is_in_both_forms_only_when_set_and_diffed_as_a_duration() {
    let leased = |lease: Option<&str>| {
        let cron = Cron::new("*/10 * * * * *").retries(2);
        let cron = match lease {
            Some(lease) => cron.lease(lease),
            None => cron,
        };
        Schema::new([("ledger", Verb::new("ledger::sync", cron))])
    };
    let schema = leased(Some("10s"));
    let text = schema.to_string();
    assert!(
        text.contains("    +cron */10 * * * * * retries=2 lease=10s\n"),
        "{text}"
    );
    assert_eq!(Schema::from_text(&text).unwrap(), schema);
    let json = serde_json::to_value(&schema).unwrap();
    assert_eq!(
        json["modules"][0]["verbs"][0]["cron"]["lease"],
        serde_json::json!("10s")
    );
    // Without a lease, neither form names one: the schema (and the deployment key) of a job that does
    // not use it is as before.
    assert!(!leased(None).to_string().contains("lease"));
    assert!(
        serde_json::to_value(leased(None)).unwrap()["modules"][0]["verbs"][0]["cron"]
            .get("lease")
            .is_none()
    );
    assert!(schema.diff(&leased(Some("0m10s"))).is_empty());
    assert_eq!(
        schema.diff(&leased(None)).to_string(),
        "~ ledger ledger::sync: lease `10s` -> the default\n"
    );
}

#[cfg(feature = "syn")]
mod attribute {
    use cron_schema::attribute::{self, DocLine};
    use cron_schema::{MissedPolicy, RunOn, Schedule};
    use quote::quote;

    #[test]
    fn retries_backoff_and_on_are_given_or_default() {
        let cron = attribute::parse(
            quote!("0 2 * * *", retries = 3, backoff = "30s"),
            quote!(
                async fn f() {}
            ),
        )
        .unwrap();
        assert_eq!(cron.retries, 3);
        assert_eq!(cron.backoff.unwrap().value(), "30s");
        assert_eq!(cron.on, RunOn::OneReplica);

        let cron = attribute::parse(
            quote!("0 2 * * *", on = "every_replica"),
            quote!(
                async fn f() {}
            ),
        )
        .unwrap();
        assert_eq!((cron.retries, cron.backoff.is_none()), (0, true));
        assert_eq!(cron.on, RunOn::EveryReplica);
    }

    #[test]
    fn retries_backoff_and_on_are_refused_alone_and_together() {
        let messages = |args: proc_macro2::TokenStream| -> Vec<String> {
            attribute::parse(
                args,
                quote!(
                    async fn f() {}
                ),
            )
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect()
        };
        assert_eq!(
            messages(quote!("0 2 * * *", retries = 101, backoff = "0s")),
            [
                "`retries = 101` is too many: a job retries at most 100 times; with the backoff doubling up to an hour, a few retries, such as `retries = 3`, cover most outages",
                "duration `0s` is zero; it must be at least one second",
            ]
        );
        assert_eq!(
            messages(quote!("0 2 * * *", retries = 3u8)),
            ["`retries` takes an integer literal without a suffix, such as `retries = 3`"]
        );
        assert_eq!(
            messages(quote!("0 2 * * *", retries = 99999999999)),
            [
                "`retries = 99999999999` is too many: a job retries at most 100 times; with the backoff doubling up to an hour, a few retries, such as `retries = 3`, cover most outages"
            ]
        );
        assert_eq!(
            messages(quote!("0 2 * * *", retries = 2, backoff = "3601s")),
            [
                "backoff `3601s` is out of range: the wait before the first retry is at least 1s and at most 1h, such as `backoff = \"30s\"`"
            ]
        );
        // A problem with one argument is reported alone, not again as a combination.
        assert_eq!(
            messages(quote!(
                "0 2 * * *",
                retries = "3",
                backoff = "30s",
                on = "every_replica"
            ))
            .len(),
            1
        );
        assert_eq!(
            messages(quote!(
                "0 2 * * *",
                on = "every_replica",
                retries = 1,
                backoff = "30s",
                missed = "once"
            )),
            [
                "a job with `on = \"every_replica\"` cannot retry: retries are kept in the store, and a job on every replica claims nothing there; remove `retries`, or run the job on one replica",
                "a job with `on = \"every_replica\"` has no missed runs to decide about: every live replica runs each occurrence when it comes, and none is claimed late; remove `missed`",
            ]
        );
    }

    #[test]
    fn a_valid_attribute_gives_its_validated_values() {
        let cron = attribute::parse(
            quote!(
                "0 2 * * *",
                timezone = "Europe/Berlin",
                timeout = "10m",
                name = "billing::invoices",
                missed = "skip"
            ),
            quote! {
                /// Sends yesterday's invoices.
                #[doc = "Twice."]
                async fn send_invoices() -> Result<(), String> { Ok(()) }
            },
        )
        .unwrap();
        assert_eq!(cron.expression.value(), "0 2 * * *");
        assert_eq!(cron.schedule, Schedule::parse("0 2 * * *").unwrap());
        assert_eq!(cron.timezone, Some("Europe/Berlin"));
        assert_eq!(cron.timeout.unwrap().value(), "10m");
        assert_eq!(cron.name.unwrap().value(), "billing::invoices");
        assert_eq!(cron.missed, MissedPolicy::Skip);
        assert_eq!(cron.function.sig.ident, "send_invoices");
        assert_eq!(
            attribute::doc(&cron.function.attrs),
            [
                DocLine::Text("Sends yesterday's invoices.".to_owned()),
                DocLine::Text("Twice.".to_owned()),
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_with_the_macros_messages() {
        let error = attribute::parse(
            quote!("0 2 * * MON", tz = "UTC", timeout = "0s"),
            quote!(
                fn send_invoices(batch: usize) {}
            ),
        )
        .unwrap_err();
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            messages,
            [
                "invalid cron expression: `MON` is not supported in the day-of-week field; write `1` instead",
                "unknown `#[cron]` argument `tz` (did you mean `timezone`?); expected one of: `timezone`, `timeout`, `name`, `missed`, `catch_up`, `retries`, `backoff`, `lease`, `on`, `jitter`, `expect_within`, `fixed`, `crate`",
                "duration `0s` is zero; it must be at least one second",
                "the `async` keyword is missing from the function declaration",
                "`#[cron]` functions take no parameters; reach application state with `cronverb::context().state::<T>()`",
            ]
        );
    }

    #[test]
    fn fixed_is_a_flag_without_a_value() {
        let parse = |args: proc_macro2::TokenStream| {
            attribute::parse(
                args,
                quote!(
                    async fn f() {}
                ),
            )
        };
        assert!(!parse(quote!("0 2 * * *")).unwrap().fixed);
        assert!(parse(quote!("0 2 * * *", fixed)).unwrap().fixed);
        assert!(
            parse(quote!("0 2 * * *", fixed, timezone = "UTC"))
                .unwrap()
                .fixed
        );
        for misuse in [
            quote!("0 2 * * *", fixed = "yes"),
            quote!("0 2 * * *", fixed = true),
            quote!("0 2 * * *", fixed(1)),
        ] {
            let messages: Vec<String> = parse(misuse)
                .unwrap_err()
                .into_iter()
                .map(|e| e.to_string())
                .collect();
            assert_eq!(
                messages,
                [
                    "`fixed` takes no value: write `#[cron(\"0 2 * * *\", fixed)]` for a job whose schedule an operator may not override, or leave it out"
                ]
            );
        }
        let twice: Vec<String> = parse(quote!("0 2 * * *", fixed, fixed))
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(twice, ["duplicate `#[cron]` argument `fixed`"]);
    }

    #[test]
    fn crate_names_the_path_of_cronverb_and_changes_nothing_else() {
        let plain = attribute::parse(
            quote!("0 2 * * *"),
            quote!(
                async fn f() {}
            ),
        )
        .unwrap();
        assert!(plain.crate_path.is_none());
        for (path, expected) in [
            ("cv", "cv"),
            ("::cv", ":: cv"),
            (
                "my_app::reexports::cronverb",
                "my_app :: reexports :: cronverb",
            ),
            ("crate::cronverb", "crate :: cronverb"),
        ] {
            let cron = attribute::parse(
                quote!("0 2 * * *", crate = #path, timezone = "Europe/Berlin"),
                quote!(
                    async fn f() {}
                ),
            )
            .unwrap();
            let written = cron.crate_path.as_ref().map(|p| quote!(#p).to_string());
            assert_eq!(written.as_deref(), Some(expected));
            assert_eq!(cron.expression.value(), plain.expression.value());
            assert_eq!(cron.timezone, Some("Europe/Berlin"));
        }
    }

    #[test]
    fn a_crate_that_is_not_a_path_is_refused_on_its_literal() {
        for path in ["", "cv::", "cv::<T>", "cv jobs", "\"cv\""] {
            let error = attribute::parse(
                quote!("0 2 * * *", crate = #path),
                quote!(
                    async fn f() {}
                ),
            )
            .unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "`{}` is not a path; `crate` names the cronverb crate as this crate refers to it, \
                     such as `crate = \"cv\"` for the dependency `cv = {{ package = \"cronverb\" }}`",
                    path.escape_default()
                ),
            );
        }
        let error = attribute::parse(
            quote!("0 2 * * *", crate = cv, crate = "cv"),
            quote!(
                async fn f() {}
            ),
        )
        .unwrap_err();
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            messages,
            [
                "`crate` takes a string literal, such as `crate = \"cv\"`",
                "duplicate `#[cron]` argument `crate`",
            ]
        );
    }

    #[test]
    fn not_a_function_is_refused() {
        let error = attribute::parse(
            quote!("* * * * *"),
            quote!(
                struct Job;
            ),
        )
        .unwrap_err();
        assert_eq!(error.to_string(), "`#[cron]` goes on an `async fn`");
    }
}

#[test]
fn catch_up_and_missed_all_round_trip_and_diff_as_windows() {
    let schema = |window: &str| {
        Schema::new([(
            "billing",
            Verb::new(
                "billing::rollup",
                Cron::new("0 * * * *")
                    .missed(MissedPolicy::All)
                    .catch_up(window),
            ),
        )])
    };
    let day = schema("1d");
    let text = day.to_string();
    assert!(
        text.contains("    +cron 0 * * * * missed=all catch_up=1d\n"),
        "{text}"
    );
    assert_eq!(Schema::from_text(&text).unwrap(), day);
    let json = day.to_json();
    assert!(json.contains(r#""catch_up": "1d""#), "{json}");
    assert_eq!(Schema::from_json(&json).unwrap(), day);
    // The same window written in hours is no change; another window is.
    assert!(day.diff(&schema("24h")).is_empty());
    assert_eq!(
        day.diff(&schema("12h")).to_string(),
        "~ billing billing::rollup: catch_up `1d` -> `12h`\n"
    );
    // A schema without the field reads as before: no window, the policy's default.
    let old = Schema::new([(
        "billing",
        Verb::new("billing::rollup", Cron::new("0 * * * *")),
    )]);
    assert!(!old.to_json().contains("catch_up"));
}

#[test]
fn jitter_round_trips_and_diffs_as_a_duration() {
    let schema = |jitter: Option<&str>| {
        let cron = Cron::new("0 0 * * *");
        Schema::new([(
            "billing",
            Verb::new(
                "billing::nightly",
                match jitter {
                    Some(jitter) => cron.jitter(jitter),
                    None => cron,
                },
            ),
        )])
    };
    let ten = schema(Some("10m"));
    let text = ten.to_string();
    assert!(text.contains("    +cron 0 0 * * * jitter=10m\n"), "{text}");
    assert_eq!(Schema::from_text(&text).unwrap(), ten);
    let json = ten.to_json();
    assert!(json.contains(r#""jitter": "10m""#), "{json}");
    assert_eq!(Schema::from_json(&json).unwrap(), ten);
    // The same width written in seconds is no change; another width, or none, is.
    assert!(ten.diff(&schema(Some("600s"))).is_empty());
    assert_eq!(
        ten.diff(&schema(Some("5m"))).to_string(),
        "~ billing billing::nightly: jitter `10m` -> `5m`\n"
    );
    let none = schema(None);
    assert_eq!(
        none.diff(&ten).to_string(),
        "~ billing billing::nightly: jitter the default -> `10m`\n"
    );
    assert!(!none.to_json().contains("jitter"));
}

#[test]
fn expect_within_round_trips_and_diffs_as_a_duration() {
    let schema = |within: Option<&str>| {
        let cron = Cron::new("0 2 * * *");
        Schema::new([(
            "billing",
            Verb::new(
                "billing::nightly",
                match within {
                    Some(within) => cron.expect_within(within),
                    None => cron,
                },
            ),
        )])
    };
    let fifteen = schema(Some("15m"));
    let text = fifteen.to_string();
    assert!(
        text.contains("    +cron 0 2 * * * expect_within=15m\n"),
        "{text}"
    );
    assert_eq!(Schema::from_text(&text).unwrap(), fifteen);
    let json = fifteen.to_json();
    assert!(json.contains(r#""expect_within": "15m""#), "{json}");
    assert_eq!(Schema::from_json(&json).unwrap(), fifteen);
    // The same span written in seconds is no change; another span, or none, is.
    assert!(fifteen.diff(&schema(Some("900s"))).is_empty());
    assert_eq!(
        fifteen.diff(&schema(Some("1h"))).to_string(),
        "~ billing billing::nightly: expect_within `15m` -> `1h`\n"
    );
    let none = schema(None);
    assert_eq!(
        none.diff(&fifteen).to_string(),
        "~ billing billing::nightly: expect_within the default -> `15m`\n"
    );
    assert!(!none.to_json().contains("expect_within"));
}

#[test]
fn fixed_round_trips_and_diffs() {
    let schema = |fixed: bool| {
        Schema::new([(
            "billing",
            Verb::new(
                "billing::nightly",
                Cron::new("0 2 * * *")
                    .timezone("Europe/Berlin")
                    .fixed(fixed),
            ),
        )])
    };
    let fixed = schema(true);
    let text = fixed.to_string();
    assert!(
        text.contains("    +cron 0 2 * * * Europe/Berlin fixed\n"),
        "{text}"
    );
    assert_eq!(Schema::from_text(&text).unwrap(), fixed);
    let json = fixed.to_json();
    assert!(json.contains(r#""fixed": true"#), "{json}");
    assert_eq!(Schema::from_json(&json).unwrap(), fixed);
    assert_eq!(
        schema(false).diff(&fixed).to_string(),
        "~ billing billing::nightly: fixed `false` -> `true`\n"
    );
    // A schema written before `fixed` existed reads as not fixed, and one not fixed writes nothing.
    assert!(!schema(false).to_json().contains("fixed"));
    assert!(!schema(false).to_string().contains("fixed"));
}
