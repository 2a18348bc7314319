use cronverb::cron;

#[cron("0 2 * * *", missed = "all")]
async fn send_invoices() {}

fn main() {}
