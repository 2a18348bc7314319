use cronverb::cron;

#[cron("0 * * * *", missed = "all", on = "every_replica")]
async fn refresh_cache() {}

#[cron("0 * * * *", catch_up = "1h", on = "every_replica")]
async fn refresh_config() {}

fn main() {}
