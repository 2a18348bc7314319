use cronverb::cron;

#[cron("0 2 * * *", expect_within = "a while")]
async fn nightly_report() {}

#[cron("0 2 * * *", expect_within = "1d")]
async fn in_days() {}

#[cron("0 * * * *", on = "every_replica", expect_within = "5m")]
async fn on_every_replica() {}

fn main() {}
