use cronverb::cron;

#[cron("0 24 * * *")]
async fn send_invoices() {}

fn main() {}
