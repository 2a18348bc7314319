use cronverb::cron;

#[cron("0 2 * * *")]
async fn send_invoices() -> String {
    String::new()
}

fn main() {}
