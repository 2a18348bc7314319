use cronverb::cron;

#[cron("0 0 30 2 *")]
async fn send_invoices() {}

fn main() {}
