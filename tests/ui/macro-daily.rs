use cronverb::cron;

#[cron("@daily")]
async fn send_invoices() {}

fn main() {}
