use cronverb::cron;

struct Pool;

#[cron("0 2 * * *")]
async fn send_invoices(_pool: &Pool, _batch: usize) {}

fn main() {}
