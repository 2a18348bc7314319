use cronverb::cron;

#[cron("0 2 * * *", timeout = "5 minutes")]
async fn send_invoices() {}

fn main() {}
