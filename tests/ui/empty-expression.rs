use cronverb::cron;

#[cron("")]
async fn send_invoices() {}

fn main() {}
