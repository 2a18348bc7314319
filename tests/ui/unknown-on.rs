use cronverb::cron;

#[cron("0 2 * * *", on = "all_replicas")]
async fn refresh_cache() {}

fn main() {}
