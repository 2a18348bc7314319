use cronverb::cron;

#[cron("0 2 * * *")]
async fn send_invoices() -> u32 {
    42
}

fn main() {}
