use cronverb::cron;

const NIGHTLY: &str = "0 2 * * *";

#[cron(NIGHTLY)]
async fn from_a_const() {}

#[cron(concat!("0 2 ", "* * *"))]
async fn from_a_macro() {}

fn main() {}
