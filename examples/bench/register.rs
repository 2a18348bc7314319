//! Register: one deployment of N verbs, a fresh database per row. The time of `PgStore::deploy` (once and
//! again with the same key), of `RuntimeBuilder::build` for N jobs, and of a replica from
//! `Runtime::start` until its deployment is active, for the deployed key and for a new key taking over.

use std::time::{Duration, Instant};

use cron_runtime::PgStore;
use sqlx::PgPool;

use crate::measure::load;
use crate::{AnyResult, Bench, Db};

impl Bench {
    pub(crate) async fn register(&self) -> AnyResult<()> {
        println!(
            "## Register: one deployment of N verbs (`0 0 0 * * *`), a fresh database per row\n"
        );
        println!(
            "`deploy`: `PgStore::deploy` of the schema (what `cronverb deploy` runs; `again`: the same \
             key a second time). `build`: `RuntimeBuilder::build` of N jobs (validation, schema, \
             fingerprint). `replica`: from `Runtime::start` until its deployment is active (registration \
             and takeover), first of the deployed key, then of a new key with the same verbs (a takeover \
             carrying N unchanged verbs).\n"
        );
        println!(
            "| verbs | deploy s | deploy again s | build s | replica (deployed key) s | replica (new key, takeover) s | load |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---|");
        for &verbs in &self.args.register_verbs {
            let db = self.create_db().await?;
            let result = self.register_in(&db, verbs).await;
            self.drop_db(db).await;
            if let Err(error) = result {
                println!("| {verbs} | failed: {error:#} | | | | | |");
            }
        }
        println!();
        Ok(())
    }

    async fn register_in(&self, db: &Db, verbs: usize) -> AnyResult<()> {
        const EXPRESSION: &str = "0 0 0 * * *";
        let pool = PgPool::connect(&db.url).await?;
        let store = PgStore::from_pool(pool.clone());
        store.migrate().await?;
        let names: Vec<String> = (0..verbs).map(|i| format!("bench::job_{i}")).collect();
        let schema = cron_schema::Schema::new(names.iter().map(|name| {
            (
                "bench",
                cron_schema::Verb::new(name.clone(), cron_schema::Cron::new(EXPRESSION)),
            )
        }));

        let started = Instant::now();
        store.admin().deploy("bench@1", &schema, None).await?;
        let deploy = started.elapsed();
        let started = Instant::now();
        store.admin().deploy("bench@1", &schema, None).await?;
        let again = started.elapsed();

        let mut build = Duration::ZERO;
        let mut replicas = Vec::new();
        for key in ["bench@1", "bench@2"] {
            let mut builder = cron_runtime::Runtime::builder()
                .module("bench")
                .deployment(key)
                .registered_jobs(false)
                .migrate(false)
                .database_url(db.url.clone());
            for name in &names {
                builder = builder.job(name.clone(), EXPRESSION, || async {});
            }
            let started = Instant::now();
            let runtime = builder.build().await?;
            build = started.elapsed();
            let started = Instant::now();
            let handle = runtime.start();
            loop {
                let active: Option<bool> =
                    sqlx::query_scalar("SELECT active FROM cron_deployments WHERE key = $1")
                        .bind(key)
                        .fetch_optional(&pool)
                        .await?;
                if active == Some(true) {
                    break;
                }
                if handle.is_finished() {
                    handle.shutdown().await?;
                    anyhow::bail!(
                        "the replica of `{key}` stopped before its deployment was active"
                    );
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            replicas.push(started.elapsed());
            handle.shutdown().await?;
        }
        pool.close().await;
        let s = |d: Duration| format!("{:.2}", d.as_secs_f64());
        println!(
            "| {verbs} | {} | {} | {} | {} | {} | {} |",
            s(deploy),
            s(again),
            s(build),
            s(replicas[0]),
            s(replicas[1]),
            load()
        );
        Ok(())
    }
}
