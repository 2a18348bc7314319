use cronverb::cron;

#[derive(Debug)]
struct BillingError;

#[cron("0 2 * * *")]
async fn send_invoices() -> Result<(), BillingError> {
    Ok(())
}

fn main() {}
