use cronverb::cron;

#[cron("0 2 L * *")]
async fn send_invoices() {}

fn main() {}
