use cronverb::cron;

#[cron("0 * * * *", missed = "all", catch_up = "yesterday")]
async fn hourly_rollup() {}

#[cron("0 * * * *", missed = "all", catch_up = "0d")]
async fn no_window() {}

fn main() {}
