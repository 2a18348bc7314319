use cronverb::cron;

struct Billing;

impl Billing {
    #[cron("0 2 * * *")]
    async fn send_invoices(&self) {}
}

fn main() {}
