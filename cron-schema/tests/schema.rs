//! The schema types: the text form, the JSON form, the diff, and (with the `syn` feature) the attribute
//! parser that the macro and `cronverb schema extract` share.

use cron_schema::{Cron, MissedPolicy, Schema, SchemaError, Verb};

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
            "unknown missed-run policy `never`; expected `once` or `skip`",
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

#[cfg(feature = "syn")]
mod attribute {
    use cron_schema::attribute::{self, DocLine};
    use cron_schema::{MissedPolicy, Schedule};
    use quote::quote;

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
                "unknown `#[cron]` argument `tz`; expected one of: `timezone`, `timeout`, `name`, `missed`, `crate`",
                "duration `0s` is zero; it must be at least one second",
                "the `async` keyword is missing from the function declaration",
                "`#[cron]` functions take no parameters; reach application state with `cronverb::context().state::<T>()`",
            ]
        );
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
