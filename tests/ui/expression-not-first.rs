use cronverb::cron;

#[cron(timezone = "Europe/Berlin", "0 2 * * *")]
async fn send_invoices() {}

fn main() {}
