use cronverb::cron;

// Every five minutes: a jitter of five minutes could start an occurrence after the next one's instant.
#[cron("*/5 * * * *", jitter = "5m")]
async fn sweep() {}

// 09:00 and 09:10 every day: the shortest interval is ten minutes, not a day.
#[cron("0,10 9 * * *", jitter = "15m")]
async fn morning() {}

// Each replica starts these itself, at the instant.
#[cron("0 * * * *", on = "every_replica", jitter = "1m")]
async fn refresh_cache() {}

fn main() {}
