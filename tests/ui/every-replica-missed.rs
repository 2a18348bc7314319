use cronverb::cron;

#[cron("*/5 * * * *", on = "every_replica", missed = "skip")]
async fn refresh_cache() {}

fn main() {}
