use cronverb::cron;

#[cron("0 2 * * 1#2")]
async fn send_invoices() {}

fn main() {}
