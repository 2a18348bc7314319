use cronverb::cron;

#[cron("0 2 * * *", timeout = "5m", timeout = "10m")]
async fn send_invoices() {}

fn main() {}
