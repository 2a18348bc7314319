use cronverb::cron;

#[cron("0 2 * * *", retries = -1)]
async fn send_invoices() {}

fn main() {}
