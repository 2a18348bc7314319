use std::rc::Rc;

use cronverb::cron;

async fn flush() {}

#[cron("0 2 * * *")]
async fn send_invoices() {
    let invoices = Rc::new(Vec::<u32>::new());
    flush().await;
    drop(invoices);
}

fn main() {}
