use cronverb::cron;

#[cron("0 2 * * *", retry = 3)]
async fn send_invoices() {}

fn main() {}
