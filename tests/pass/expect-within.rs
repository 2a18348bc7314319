//! `expect_within` reaches the registration, the listed job and the schema.

use cronverb::__private::{Registration, inventory};
use cronverb::cron;

#[cron("0 2 * * *", expect_within = "15m", name = "billing::nightly")]
async fn nightly() {}

#[cron("0 * * * *", name = "billing::hourly")]
async fn hourly() {}

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    assert_eq!(find("billing::nightly").expect_within, Some("15m"));
    assert_eq!(find("billing::hourly").expect_within, None);

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "billing::nightly")
        .expect("listed");
    assert_eq!(job.expect_within.as_deref(), Some("15m"));

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::billing::nightly(Unit) Unit\n    +cron 0 2 * * * expect_within=15m\n"),
        "{schema}"
    );
    let json = cronverb::schema().to_json();
    assert!(json.contains(r#""expect_within": "15m""#), "{json}");
}
