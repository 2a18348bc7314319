use cronverb::cron;

#[cron("0 2 * * *")]
fn send_invoices() {}

fn main() {}
