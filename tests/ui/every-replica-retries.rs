use cronverb::cron;

#[cron("*/5 * * * *", on = "every_replica", retries = 3)]
async fn refresh_cache() {}

fn main() {}
