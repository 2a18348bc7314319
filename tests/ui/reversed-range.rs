use cronverb::cron;

#[cron("0 22-2 * * *")]
async fn send_invoices() {}

fn main() {}
