use cronverb::cron;

#[cron("0 * * * *", missed = "skip", catch_up = "1h")]
async fn hourly() {}

fn main() {}
