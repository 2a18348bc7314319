use cronverb::cron;

#[cron("0 2 * * *")]
const async fn send_invoices() {}

fn main() {}
