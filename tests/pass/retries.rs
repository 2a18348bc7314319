//! `retries`, `backoff` and `on` reach the registration, and a job without them has the defaults.

use cronverb::__private::{Registration, inventory};
use cronverb::{RunOn, cron};

#[cron("0 2 * * *", retries = 3, backoff = "30s", name = "billing::invoices")]
async fn send_invoices() {}

#[cron("*/5 * * * *", on = "every_replica", name = "cache::refresh")]
async fn refresh_cache() {}

#[cron("0 3 * * *", on = "one_replica", retries = 0, name = "billing::defaults")]
async fn defaults() {}

fn find(name: &str) -> &'static Registration {
    inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no registration named {name}"))
}

fn main() {
    let invoices = find("billing::invoices");
    assert_eq!(invoices.retries, 3);
    assert_eq!(invoices.backoff, Some("30s"));
    assert_eq!(invoices.on, RunOn::OneReplica);

    let refresh = find("cache::refresh");
    assert_eq!(refresh.retries, 0);
    assert_eq!(refresh.backoff, None);
    assert_eq!(refresh.on, RunOn::EveryReplica);

    let defaults = find("billing::defaults");
    assert_eq!(defaults.retries, 0);
    assert_eq!(defaults.backoff, None);
    assert_eq!(defaults.on, RunOn::OneReplica);

    let job = cronverb::jobs()
        .into_iter()
        .find(|job| job.name == "billing::invoices")
        .expect("listed");
    assert_eq!(job.retries, 3);
    assert_eq!(job.backoff.as_deref(), Some("30s"));
    assert_eq!(job.on, RunOn::OneReplica);

    let schema = cronverb::schema().to_string();
    assert!(
        schema.contains("  verb ::billing::invoices(Unit) Unit\n    +cron 0 2 * * * retries=3 backoff=30s\n"),
        "{schema}"
    );
    assert!(
        schema.contains("  verb ::cache::refresh(Unit) Unit\n    +cron */5 * * * * on=every_replica\n"),
        "{schema}"
    );
    assert!(
        schema.contains("  verb ::billing::defaults(Unit) Unit\n    +cron 0 3 * * *\n"),
        "{schema}"
    );
}
