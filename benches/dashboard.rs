//! The dashboard's pages with real history: the latency of each page served by the router with 1,000 jobs
//! and 1,000,000 runs, and the plan of every query each page issues. Results are in docs/benchmarks.md.
//!
//! ```console
//! $ cargo bench --bench dashboard --features dashboard                       # 1,000 jobs, 1,000,000 runs
//! $ cargo bench --bench dashboard --features dashboard -- --jobs 50 --runs 20000 --iterations 20
//! ```
//!
//! Options: `--jobs N` (default 1000, in `--modules` modules, default 10), `--runs N` (history rows in
//! all, default 1,000,000), `--iterations N` (requests per page, default 300), `--depth N` (how many
//! "Older runs" links the deep job page is past the first, default 15), `--no-plans`, `--database-url`
//! (default `$DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/postgres`; it must allow `CREATE
//! DATABASE`: the bench seeds a fresh database `cronverb_dashbench_<pid>_<n>` and drops it at the end).
//!
//! The data is tests/support/seed.rs's: the deployments and jobs registered as replicas and operators
//! register them, the history inserted with `generate_series` (every outcome, late, manual and skipped
//! runs), then `ANALYZE`. Each page is requested through the router in this process
//! (`tower::ServiceExt::oneshot`, so no socket is measured), first a few times to warm the pool and the
//! caches, then `--iterations` times one after another; a request's latency is from the call to its
//! last body byte. The pages: the overview (its banners, every module with its counts of the last 24
//! hours, the first 100 jobs), its second page, its jobs filtered by state, a job's page (its newest
//! runs), the same job's page `--depth` pages older (keyset pagination: as cheap as the first), and the
//! page of the deployment registered ahead (its schema and the difference from the active one).
//!
//! The plans: a second router whose connections load PostgreSQL's `auto_explain` with
//! `log_min_duration = 0`, `log_analyze` and `log_buffers`, at the level `notice`, so that the plan of
//! every statement comes back to this process as a notice (sqlx reports notices as `tracing` events of
//! the target `sqlx::postgres::notice`); each page is requested once and its statements' plans printed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use cron_runtime::store::postgres::PgStore;
use cronverb::dashboard::Dashboard;
use sqlx::Executor as _;
use sqlx::postgres::PgPoolOptions;
use tower::ServiceExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

#[path = "../tests/support/seed.rs"]
mod seed;

#[derive(Debug, Clone)]
struct Args {
    jobs: usize,
    modules: usize,
    runs: u64,
    iterations: usize,
    depth: usize,
    plans: bool,
    url: String,
}

fn args() -> Args {
    let mut args = Args {
        jobs: 1000,
        modules: 10,
        runs: 1_000_000,
        iterations: 300,
        depth: 15,
        plans: true,
        url: seed::server_url(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .unwrap_or_else(|| panic!("`{name}` needs a value"))
        };
        match arg.as_str() {
            "--jobs" => args.jobs = value("--jobs").parse().expect("--jobs N"),
            "--modules" => args.modules = value("--modules").parse().expect("--modules N"),
            "--runs" => args.runs = value("--runs").parse().expect("--runs N"),
            "--iterations" => {
                args.iterations = value("--iterations").parse().expect("--iterations N");
            }
            "--depth" => args.depth = value("--depth").parse().expect("--depth N"),
            "--no-plans" => args.plans = false,
            "--database-url" => args.url = value("--database-url"),
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            other => panic!(
                "unknown option `{other}`; expected one of: `--jobs`, `--modules`, `--runs`, \
                 `--iterations`, `--depth`, `--no-plans`, `--database-url`"
            ),
        }
    }
    args
}

fn main() -> anyhow::Result<()> {
    let args = args();
    let notices = Notices::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(notices.clone()))?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(bench(args, notices))
}

/// One page to measure.
struct Page {
    name: &'static str,
    path: String,
}

async fn bench(args: Args, notices: Notices) -> anyhow::Result<()> {
    let db = seed::Database::create(&args.url, "dashbench").await?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&db.pool)
        .await?;
    println!("# the dashboard's pages on PostgreSQL {version}");
    println!("load average at start: {}", load());

    let per_job = u32::try_from(args.runs.div_ceil(args.jobs as u64))?;
    let started = Instant::now();
    let seeded = seed::seed(&db.pool, &seed::generated(args.modules, args.jobs), per_job).await?;
    println!(
        "seeded {} jobs in {} modules and {} runs in {:.1} s",
        args.jobs,
        args.modules,
        seeded.runs,
        started.elapsed().as_secs_f64()
    );

    let router = Dashboard::new(PgStore::from_pool(db.pool.clone()).admin()).router();
    let pages = pages(&router, &seeded, args.depth).await?;

    println!();
    println!(
        "| page | path | requests | p50 ms | p99 ms | max ms | bytes |\n|---|---|---:|---:|---:|---:|---:|"
    );
    for page in &pages {
        for _ in 0..5 {
            get(&router, &page.path).await?;
        }
        let mut took = Vec::with_capacity(args.iterations);
        let mut bytes = 0;
        for _ in 0..args.iterations {
            let start = Instant::now();
            bytes = get(&router, &page.path).await?.len();
            took.push(start.elapsed());
        }
        took.sort();
        println!(
            "| {} | `{}` | {} | {:.1} | {:.1} | {:.1} | {} |",
            page.name,
            page.path,
            took.len(),
            ms(quantile(&took, 0.50)),
            ms(quantile(&took, 0.99)),
            ms(*took.last().unwrap_or(&Duration::ZERO)),
            bytes
        );
    }
    println!("\nload average at end: {}", load());

    if args.plans {
        plans(&db.url, &pages, &notices).await?;
    }
    Ok(())
}

/// The pages: their paths read from the overview's and the job page's own links, as a person follows
/// them.
async fn pages(router: &Router, seeded: &seed::Seeded, depth: usize) -> anyhow::Result<Vec<Page>> {
    let overview = get(router, "/").await?;
    let job = link_to(&overview, &format!(">{}<", seeded.plain))
        .with_context(|| format!("no link to {} on the overview", seeded.plain))?;
    let deployment = link_to(&overview, &format!(">{}<", seeded.next_key))
        .unwrap_or_else(|| format!("/deployments/{}", seeded.next_key));
    let mut deep = job.clone();
    let mut pages_back = 0;
    while pages_back < depth {
        let html = get(router, &deep).await?;
        match link_to(&html, ">Older runs<") {
            Some(older) => deep = older,
            None => break,
        }
        pages_back += 1;
    }
    let deep_name: &'static str =
        Box::leak(format!("job, {pages_back} pages older").into_boxed_str());
    Ok(vec![
        Page {
            name: "overview",
            path: "/".to_owned(),
        },
        // The next page of jobs, and the filter by state: each still reads every job's status.
        Page {
            name: "overview, page 2",
            path: "/?page=2".to_owned(),
        },
        Page {
            name: "overview, failing jobs",
            path: "/?state=failing".to_owned(),
        },
        Page {
            name: "job, newest runs",
            path: job,
        },
        Page {
            name: deep_name,
            path: deep,
        },
        Page {
            name: "deployment registered ahead",
            path: deployment,
        },
    ])
}

/// The `href` of the first link whose text is `text` (`>text<`).
fn link_to(html: &str, text: &str) -> Option<String> {
    let end = html.find(text)?;
    let tag = &html[html[..end].rfind("<a ")?..end];
    let start = tag.find("href=\"")? + "href=\"".len();
    let href = &tag[start..];
    Some(
        href[..href.find('"')?]
            .replace("&amp;", "&")
            .replace("&#x2f;", "/"),
    )
}

/// The body of `GET path`, which must answer 200.
async fn get(router: &Router, path: &str) -> anyhow::Result<String> {
    let request = Request::get(path).body(Body::empty())?;
    let response = router.clone().oneshot(request).await?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    let body = String::from_utf8(body.to_vec())?;
    anyhow::ensure!(status == StatusCode::OK, "GET {path}: {status}\n{body}");
    Ok(body)
}

/// Each page requested once through a router whose connections explain every statement.
async fn plans(url: &str, pages: &[Page], notices: &Notices) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|connection, _| {
            Box::pin(async move {
                connection
                    .execute(
                        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; \
                         SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; \
                         SET auto_explain.log_level = notice",
                    )
                    .await?;
                Ok(())
            })
        })
        .connect(url)
        .await;
    let pool = match pool {
        Ok(pool) => pool,
        Err(error) => {
            println!("\nno plans: auto_explain could not be loaded ({error})");
            return Ok(());
        }
    };
    let router = Dashboard::new(PgStore::from_pool(pool).admin()).router();
    for page in pages {
        // Once to prepare the statements, and once explained.
        get(&router, &page.path).await?;
        notices.take();
        get(&router, &page.path).await?;
        println!("\n## Plans of the page: {} (`{}`)\n", page.name, page.path);
        for plan in notices.take() {
            println!("```\n{}\n```", plan.trim_end());
        }
    }
    Ok(())
}

/// The notices sqlx reports as `tracing` events: here, the plans auto_explain sends.
#[derive(Debug, Clone, Default)]
struct Notices(Arc<Mutex<Vec<String>>>);

impl Notices {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Notices {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::postgres::notice" {
            return;
        }
        struct Message(Option<String>);
        impl tracing::field::Visit for Message {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" && self.0.is_none() {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut message = Message(None);
        event.record(&mut message);
        if let Some(text) = message.0 {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(text);
        }
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// `/proc/loadavg`'s first three numbers: whether the machine was quiet.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}
