use cronverb::cron;

#[cron("0 2 15W * *")]
async fn send_invoices() {}

fn main() {}
