use cronverb::cron;

#[cron("0 2 * * *", timeout = "1d")]
async fn send_invoices() {}

fn main() {}
