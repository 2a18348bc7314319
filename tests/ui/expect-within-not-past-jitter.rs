use cronverb::cron;

// A run may start up to ten minutes after 02:00: it could not have succeeded by 02:10.
#[cron("0 2 * * *", jitter = "10m", expect_within = "10m")]
async fn nightly_report() {}

#[cron("0 2 * * *", expect_within = "5m", jitter = "10m")]
async fn nightly_export() {}

// Longer than the jitter: accepted.
#[cron("0 2 * * *", jitter = "10m", expect_within = "15m")]
async fn nightly_sync() {}

fn main() {}
