use cronverb::cron;

#[cron("0 2 * * *", tz = "Europe/Berlin")]
async fn send_invoices() {}

fn main() {}
