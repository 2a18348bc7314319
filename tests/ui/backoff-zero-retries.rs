use cronverb::cron;

#[cron("0 2 * * *", retries = 0, backoff = "30s")]
async fn send_invoices() {}

fn main() {}
