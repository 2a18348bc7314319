//! `missed = "all"` and `catch_up` reach the registration, the listed job and the schema.

use cronverb::__private::{Registration, inventory};
use cronverb::{MissedPolicy, cron};

#[cron("0 * * * *", missed = "all", catch_up = "1d12h", name = "rollup::hourly")]
async fn hourly() {}

#[cron("*/10 * * * * *", missed = "all", name = "rollup::often")]
async fn often() {}

#[cron("0 2 * * *", catch_up = "6h", name = "rollup::nightly")]
async fn nightly() {}

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    let hourly = find("rollup::hourly");
    assert_eq!((hourly.missed, hourly.catch_up), (MissedPolicy::All, Some("1d12h")));
    let often = find("rollup::often");
    assert_eq!((often.missed, often.catch_up), (MissedPolicy::All, None));
    let nightly = find("rollup::nightly");
    assert_eq!((nightly.missed, nightly.catch_up), (MissedPolicy::Once, Some("6h")));

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "rollup::hourly")
        .expect("listed");
    assert_eq!(job.catch_up.as_deref(), Some("1d12h"));

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::rollup::hourly(Unit) Unit\n    +cron 0 * * * * missed=all catch_up=1d12h\n"),
        "{schema}"
    );
    let json = cronverb::schema().to_json();
    assert!(json.contains(r#""missed": "all","#), "{json}");
    assert!(json.contains(r#""catch_up": "1d12h""#), "{json}");
}
