use cronverb::cron;

#[cron("0 2 1 JAN *")]
async fn send_invoices() {}

fn main() {}
