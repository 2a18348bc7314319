use cronverb::cron;

#[cron("0 2 * * *", missed = "always")]
async fn send_invoices() {}

fn main() {}
