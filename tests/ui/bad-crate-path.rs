use cronverb::cron;

#[cron("0 2 * * *", crate = "cronverb::")]
async fn send_invoices() {}

fn main() {}
