use cronverb::cron;

// Bounded as every duration a job declares.
#[cron("0 2 * * *", lease = "8761h")]
async fn send_invoices() {}

#[cron("0 3 * * *", lease = "1d")]
async fn send_reminders() {}

fn main() {}
