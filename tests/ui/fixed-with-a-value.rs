use cronverb::cron;

#[cron("0 2 * * *", fixed = "yes")]
async fn nightly_report() {}

#[cron("0 2 * * *", fixed(1))]
async fn hourly_sync() {}

#[cron("0 2 * * *", fixed, fixed)]
async fn twice() {}

fn main() {}
