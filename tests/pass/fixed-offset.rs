//! A fixed offset on purpose is an `Etc` zone (its sign is inverted), and the longest timeout is a year
//! (docs/expressions.md, docs/attribute.md).

use cronverb::__private::{Registration, inventory};
use cronverb::cron;

#[cron("0 2 * * *", timezone = "Etc/GMT+5", timeout = "8760h")]
async fn fixed() {}

fn main() {
    let fixed = inventory::iter::<Registration>
        .into_iter()
        .find(|r| r.name.ends_with("::fixed"))
        .expect("registered");
    assert_eq!(fixed.timezone, Some("Etc/GMT+5"));
    assert_eq!(fixed.timeout, Some("8760h"));
}
