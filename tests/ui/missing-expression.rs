use cronverb::cron;

#[cron]
async fn no_arguments() {}

#[cron(timezone = "Europe/Berlin")]
async fn only_named_arguments() {}

fn main() {}
