use cronverb::cron;

#[cron("0 2 * * every-day")]
async fn send_invoices() {}

fn main() {}
