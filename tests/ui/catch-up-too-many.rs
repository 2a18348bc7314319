use cronverb::cron;

// An every-second job down a week: 604,800 occurrences.
#[cron("* * * * * *", missed = "all", catch_up = "7d")]
async fn every_second() {}

// The default window of `all`, a day, holds 86,400 of them.
#[cron("* * * * * *", missed = "all")]
async fn every_second_by_default() {}

fn main() {}
