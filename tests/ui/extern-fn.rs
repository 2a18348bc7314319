use cronverb::cron;

#[cron("0 2 * * *")]
async extern "C" fn send_invoices() {}

fn main() {}
