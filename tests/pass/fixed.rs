//! `fixed` reaches the registration, the listed job and the schema.

use cronverb::__private::{Registration, inventory};
use cronverb::cron;

#[cron("0 2 * * *", fixed, name = "billing::nightly")]
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
    assert!(find("billing::nightly").fixed);
    assert!(!find("billing::hourly").fixed);

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "billing::nightly")
        .expect("listed");
    assert!(job.fixed);

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::billing::nightly(Unit) Unit\n    +cron 0 2 * * * fixed\n"),
        "{schema}"
    );
    let json = cronverb::schema().to_json();
    assert!(json.contains(r#""fixed": true"#), "{json}");
    assert!(!cronverb::schema().to_json().contains(r#""fixed": false"#));
}
