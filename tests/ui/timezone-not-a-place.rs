use cronverb::cron;

// Each is in the IANA database, and none is what its user likely means: `EST` is UTC−05:00 all year.
#[cron("0 2 * * *", timezone = "EST")]
async fn eastern() {}

#[cron("0 2 * * *", timezone = "PST8PDT")]
async fn pacific() {}

#[cron("0 2 * * *", timezone = "CET")]
async fn central_europe() {}

// Not in the database; the message still says the zone to write.
#[cron("0 2 * * *", timezone = "PST")]
async fn pacific_abbreviation() {}

fn main() {}
