use cronverb::cron;

#[cron("0 2 * * *", timezone = "Europe/Berln")]
async fn send_invoices() {}

fn main() {}
