use cronverb::cron;

#[cron("0 2 * * *")]
struct SendInvoices {
    batch: usize,
}

fn main() {}
