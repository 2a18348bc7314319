use cronverb::cron;

#[cron("0 2 * * *")]
async unsafe fn send_invoices() {}

fn main() {}
