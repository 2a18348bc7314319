use cronverb::cron;

#[cron("0 0 * * *", jitter = "a while")]
async fn nightly_export() {}

#[cron("0 0 * * *", jitter = "0s")]
async fn no_jitter() {}

#[cron("0 0 * * *", jitter = 600)]
async fn not_a_string() {}

fn main() {}
