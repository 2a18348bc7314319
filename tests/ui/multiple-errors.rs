use cronverb::cron;

#[cron("0 2 * * MON", tz = "UTC", timeout = "0s", missed = "never")]
fn send_invoices(_batch: usize) {}

fn main() {}
