use cronverb::cron;

#[cron("0 2 * * *", crate = "cv")]
async fn send_invoices() {}

fn main() {}
