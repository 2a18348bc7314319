use cronverb::cron;

#[cron("*/0 * * * *")]
async fn send_invoices() {}

fn main() {}
