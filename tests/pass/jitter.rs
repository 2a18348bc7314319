//! `jitter` reaches the registration, the listed job and the schema.

use cronverb::__private::{Registration, inventory};
use cronverb::cron;

#[cron("0 0 * * *", jitter = "10m", name = "exports::nightly")]
async fn nightly() {}

#[cron("0 * * * *", name = "exports::hourly")]
async fn hourly() {}

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    assert_eq!(find("exports::nightly").jitter, Some("10m"));
    assert_eq!(find("exports::hourly").jitter, None);

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "exports::nightly")
        .expect("listed");
    assert_eq!(job.jitter.as_deref(), Some("10m"));

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::exports::nightly(Unit) Unit\n    +cron 0 0 * * * jitter=10m\n"),
        "{schema}"
    );
    let json = cronverb::schema().to_json();
    assert!(json.contains(r#""jitter": "10m""#), "{json}");
}
