use cronverb::cron;

// It would overflow the first run's deadline.
#[cron("0 2 * * *", timeout = "18446744073709551615s")]
async fn send_invoices() {}

#[cron("0 2 * * *", timeout = "8761h")]
async fn just_over_a_year() {}

fn main() {}
