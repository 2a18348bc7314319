use cronverb::cron;

#[cron("0 0 0 29 2 * 2021")]
async fn send_invoices() {}

fn main() {}
