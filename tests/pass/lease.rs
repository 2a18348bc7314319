//! `lease` reaches the registration, the listed job and the schema; a job without it has none (the
//! runtime's lease).

use cronverb::__private::{Registration, inventory};
use cronverb::cron;

#[cron("*/10 * * * * *", lease = "10s", retries = 2, name = "ledger::sync")]
async fn sync_ledger() {}

#[cron("0 2 * * *", lease = "3s", name = "ledger::shortest")]
async fn shortest() {}

#[cron("0 3 * * *", name = "ledger::plain")]
async fn plain() {}

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    assert_eq!(find("ledger::sync").lease, Some("10s"));
    assert_eq!(find("ledger::shortest").lease, Some("3s"));
    assert_eq!(find("ledger::plain").lease, None);

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "ledger::sync")
        .expect("listed");
    assert_eq!(job.lease.as_deref(), Some("10s"));

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::ledger::sync(Unit) Unit\n    +cron */10 * * * * * retries=2 lease=10s\n"),
        "{schema}"
    );
    assert!(
        schema.contains("  verb ::ledger::plain(Unit) Unit\n    +cron 0 3 * * *\n"),
        "{schema}"
    );
}
