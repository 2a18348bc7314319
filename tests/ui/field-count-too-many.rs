use cronverb::cron;

#[cron("0 0 2 * * * 2030 1")]
async fn send_invoices() {}

fn main() {}
