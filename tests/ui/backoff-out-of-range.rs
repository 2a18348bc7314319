use cronverb::cron;

#[cron("0 2 * * *", retries = 3, backoff = "2h")]
async fn send_invoices() {}

fn main() {}
