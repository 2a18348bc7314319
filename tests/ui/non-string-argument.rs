use cronverb::cron;

#[cron("0 2 * * *", timeout = 300, missed = skip)]
async fn send_invoices() {}

fn main() {}
