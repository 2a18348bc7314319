use cronverb::cron;

#[cron("0 2 * * MON")]
async fn send_invoices() {}

fn main() {}
