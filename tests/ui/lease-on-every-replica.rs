use cronverb::cron;

#[cron("*/15 * * * * *", on = "every_replica", lease = "10s")]
async fn refresh_cache() {}

fn main() {}
