use cronverb::cron;

#[cron("0 2 * * *", retries = 1000)]
async fn send_invoices() {}

fn main() {}
