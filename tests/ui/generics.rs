use cronverb::cron;

#[cron("0 2 * * *")]
async fn send_invoices<T: Default>() {}

#[cron("0 3 * * *")]
async fn with_where_clause()
where
    String: Clone,
{
}

fn main() {}
