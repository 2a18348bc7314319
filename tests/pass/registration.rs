//! Every argument reaches the registration, and the handler runs the function.

use cronverb::__private::{Registration, inventory};
use cronverb::{MissedPolicy, cron};

/// Sends yesterday's invoices.
///
///  Indented line.
#[cron(
    "0 2 * * *",
    timezone = "Europe/Berlin",
    timeout = "10m",
    name = "billing::invoices",
    missed = "skip"
)]
async fn send_invoices() -> Result<(), String> {
    Ok(())
}

#[cron("*/5 * * * *")]
async fn defaults() {}

#[cron("0 0 * * * *")]
async fn fails() -> Result<(), std::io::Error> {
    Err(std::io::Error::other("disk full"))
}

/// Loads invoices.
#[doc = concat!("Built ", "by a macro.")]
#[cron("0 3 * * *")]
async fn fails_with_context() -> anyhow::Result<()> {
    use anyhow::Context as _;
    Err(std::io::Error::other("disk full")).context("while loading invoices")
}

mod nested {
    use cronverb::cron;

    #[cron(r"30 4 * * 1-5")]
    pub(crate) async fn weekday() {}
}

/// The crate's name (trybuild names it), as `module_path!()` spells it at the root.
const ROOT: &str = module_path!();

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    let invoices = find("billing::invoices");
    assert_eq!(invoices.module_path, ROOT);
    assert_eq!(invoices.expression, "0 2 * * *");
    assert_eq!(invoices.timezone, Some("Europe/Berlin"));
    assert_eq!(invoices.timeout, Some("10m"));
    assert_eq!(invoices.missed, MissedPolicy::Skip);
    assert!(
        invoices.file.ends_with("registration.rs"),
        "{}",
        invoices.file
    );
    // The line of `async fn send_invoices`, not of the attribute above it.
    assert_eq!(invoices.line, 16);
    assert_eq!(
        invoices.doc,
        "Sends yesterday's invoices.\n\n Indented line."
    );
    assert_eq!(runtime.block_on((invoices.handler)()), Ok(()));

    let by_default = find(&format!("{ROOT}::defaults"));
    assert_eq!(by_default.expression, "*/5 * * * *");
    assert_eq!(by_default.timezone, None);
    assert_eq!(by_default.timeout, None);
    assert_eq!(by_default.missed, MissedPolicy::Once);
    assert_eq!(by_default.line, 21);
    assert_eq!(by_default.doc, "");
    assert_eq!(runtime.block_on((by_default.handler)()), Ok(()));

    let fails = find(&format!("{ROOT}::fails"));
    assert_eq!(
        runtime.block_on((fails.handler)()),
        Err("disk full".to_owned())
    );

    let with_context = find(&format!("{ROOT}::fails_with_context"));
    assert_eq!(with_context.doc, "Loads invoices.\nBuilt by a macro.");
    assert_eq!(
        runtime.block_on((with_context.handler)()),
        Err("while loading invoices: disk full".to_owned()),
    );

    let weekday = find(&format!("{ROOT}::nested::weekday"));
    assert_eq!(weekday.module_path, format!("{ROOT}::nested"));
    assert_eq!(weekday.expression, "30 4 * * 1-5");
    assert_eq!(runtime.block_on((weekday.handler)()), Ok(()));

    assert_eq!(inventory::iter::<Registration>.into_iter().count(), 5);

    // The functions stay callable as written.
    runtime.block_on(async {
        send_invoices().await.unwrap();
        defaults().await;
        nested::weekday().await;
    });
}
