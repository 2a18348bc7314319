use cronverb::cron;

// The runtime renews a run's lease every third of it, at most once a second: under 3 s is refused.
#[cron("*/10 * * * * *", lease = "2s")]
async fn sync_ledger() {}

fn main() {}
