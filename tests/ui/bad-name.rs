use cronverb::cron;

#[cron("0 2 * * *", name = "")]
async fn empty() {}

#[cron("0 2 * * *", name = "send invoices")]
async fn whitespace() {}

#[cron("0 2 * * *", name = "billing/invoices")]
async fn slash() {}

fn main() {}
