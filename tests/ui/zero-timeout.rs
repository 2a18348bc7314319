use cronverb::cron;

#[cron("0 2 * * *", timeout = "0m")]
async fn send_invoices() {}

fn main() {}
