//! The dashboard's router against a real PostgreSQL server, one fresh database per test
//! (`#[sqlx::test]`, which needs `DATABASE_URL`): escaping, headers, the refusals of actions, a pause
//! through the form, keyset pages, nesting (docs/dashboard.md).

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use cronverb::dashboard::{self, Actor, CONTENT_SECURITY_POLICY, Dashboard};
use cronverb::{Cron, PgStore, Schema, Verb};
use http_body_util::BodyExt;
use sqlx::PgPool;
use tower::ServiceExt;

const XSS: &str = "<img src=x onerror=alert(1)>";
const JOB: &str = "/jobs/billing/billing%3A%3Asend";

/// Migrates, registers deployment `v1` of module `billing` with `billing::send` and `billing::other`,
/// and makes it active.
async fn seed(pool: &PgPool) -> PgStore {
    let store = PgStore::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let schema = Schema::new([
        (
            "billing",
            Verb::new("billing::send", Cron::new("0 2 * * 1-5")),
        ),
        (
            "billing",
            Verb::new("billing::other", Cron::new("*/15 * * * *")),
        ),
    ]);
    store.admin().deploy("v1", &schema, None).await.unwrap();
    sqlx::query("UPDATE cron_deployments SET active = true, activated_at = now()")
        .execute(pool)
        .await
        .unwrap();
    store
}

/// Records `count` finished runs of `billing::send`, one a minute back from an hour ago, with `outcome`
/// and `error`.
async fn runs(pool: &PgPool, count: i32, outcome: &str, error: Option<&str>) {
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome, \
                                    error, runner, runner_id) \
         SELECT 'billing', 'billing::send', t, t + interval '1 second', t + interval '3 seconds', $2, $3, \
                'host:1', 1 \
         FROM generate_series(1, $1) AS i, \
              LATERAL (SELECT date_trunc('minute', now()) - interval '1 hour' - i * interval '1 minute' AS t) s",
    )
    .bind(count)
    .bind(outcome)
    .bind(error)
    .execute(pool)
    .await
    .unwrap();
}

async fn paused(pool: &PgPool) -> (bool, Option<String>) {
    sqlx::query_as("SELECT paused, pause_note FROM cron_jobs WHERE verb = 'billing::send'")
        .fetch_one(pool)
        .await
        .unwrap()
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

async fn get(router: &Router, path: &str) -> Reply {
    send(router, Request::get(path).body(Body::empty()).unwrap()).await
}

/// A GET with the cookie `cookie` and the header `x-user: alice`.
async fn get_as(router: &Router, path: &str, cookie: &str) -> Reply {
    let request = Request::get(path)
        .header(header::COOKIE, cookie)
        .header("x-user", "alice")
        .body(Body::empty())
        .unwrap();
    send(router, request).await
}

/// A form POST with `cookie` (may be empty) and the header `x-user: alice`.
async fn post(router: &Router, path: &str, cookie: &str, form: &str) -> Reply {
    let mut request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("x-user", "alice");
    if !cookie.is_empty() {
        request = request.header(header::COOKIE, cookie);
    }
    send(router, request.body(Body::from(form.to_owned())).unwrap()).await
}

/// The CSRF cookie a page set (`name=value`) and the token of its forms.
fn csrf(reply: &Reply) -> (String, String) {
    let cookie = reply.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let token = reply
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .expect("the page has an action form")
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    (cookie, token)
}

/// The dashboard whose hook lets the requests with `x-user` act as that user.
fn with_hook(store: &PgStore) -> Router {
    Dashboard::new(store.admin())
        .authorize(|request| {
            let user = request.headers.get("x-user")?.to_str().ok()?;
            Some(Actor {
                name: user.to_owned(),
            })
        })
        .router()
}

#[sqlx::test(migrations = false)]
async fn handler_text_is_escaped(pool: PgPool) {
    let store = seed(&pool).await;
    runs(&pool, 1, "failed", Some(XSS)).await;
    let router = dashboard::router(store.admin());
    for path in ["/", JOB] {
        let reply = get(&router, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(!reply.body.contains("<img"), "{path}: {}", reply.body);
        assert!(
            reply.body.contains("&#60;img src=x onerror=alert(1)&#62;"),
            "{path}: {}",
            reply.body
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_retried_run_shows_its_attempts_and_a_pending_retry_when_it_is_due(pool: PgPool) {
    let store = seed(&pool).await;
    // An occurrence that ended after two attempts (the first one's error a hostile text), and one whose
    // retry is pending: the job row is held idle at the retry's instant for it.
    sqlx::raw_sql(
        r#"INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome,
                                      error, runner, runner_id, attempts)
           VALUES ('billing', 'billing::send', '2026-03-08T10:00:00Z', '2026-03-08T10:00:00Z',
                   '2026-03-08T10:00:35Z', 'succeeded', NULL, 'host:1', 1,
                   '[{"outcome":"panicked","error":"<img src=x onerror=alert(1)>","started_at":"2026-03-08T10:00:00Z","finished_at":"2026-03-08T10:00:01.500Z"},
                     {"outcome":"succeeded","error":null,"started_at":"2026-03-08T10:00:05Z","finished_at":"2026-03-08T10:00:35Z"}]');
           INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, outcome, runner,
                                      runner_id, attempts)
           VALUES ('billing', 'billing::send', '2026-03-08T11:00:00Z', '2026-03-08T11:00:00Z', 'running',
                   'host:1', 1,
                   '[{"outcome":"timed_out","error":"ran past its timeout","started_at":"2026-03-08T11:00:00Z","finished_at":"2026-03-08T11:00:30Z"}]');
           UPDATE cron_jobs SET next_execution = '2026-03-08T11:00:42Z',
                                retry_run_id = (SELECT id FROM cron_job_runs WHERE scheduled_at = '2026-03-08T11:00:00Z')
           WHERE verb = 'billing::send';"#,
    )
    .execute(&pool)
    .await
    .unwrap();
    let router = dashboard::router(store.admin());
    let reply = get(&router, JOB).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = &reply.body;
    assert!(
        body.contains("outcome-retrying\">retrying</span>"),
        "{body}"
    );
    assert!(
        body.contains("next attempt due 2026-03-08 11:00:42 UTC"),
        "{body}"
    );
    assert_eq!(body.matches("<tr class=\"attempt\">").count(), 3, "{body}");
    assert!(
        body.contains("<span class=\"tag\">2 attempts</span>")
            && body.contains("<span class=\"tag\">1 attempt so far</span>"),
        "{body}"
    );
    assert!(
        body.contains(
            "outcome-panicked\">panicked</span></td><td>2026-03-08 10:00:00 UTC</td><td>1.5 s</td>"
        ),
        "{body}"
    );
    assert!(!body.contains("<img"), "{body}");
    assert!(
        body.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{body}"
    );
}

#[sqlx::test(migrations = false)]
async fn every_response_has_the_csp_and_no_inline_script_or_style(pool: PgPool) {
    let store = seed(&pool).await;
    runs(&pool, 3, "succeeded", None).await;
    let router = with_hook(&store);
    for path in ["/", JOB, "/deployments/v1", "/nothing-here"] {
        let reply = get_as(&router, path, "").await;
        assert_eq!(
            reply.headers[header::CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline"));
        // Every script is a file of the router's; no inline style that the CSP would block.
        assert_eq!(
            reply.body.matches("<script").count(),
            reply.body.matches("<script src=").count(),
            "{path}"
        );
        assert!(!reply.body.contains(" style="), "{path}");
        assert!(!reply.body.contains("<style"), "{path}");
    }
}

#[sqlx::test(migrations = false)]
async fn actions_without_csrf_or_token_change_nothing(pool: PgPool) {
    let store = seed(&pool).await;
    let router = Dashboard::new(store.admin())
        .action_token("s3cret")
        .router();
    let page = get(&router, JOB).await;
    let (cookie, token) = csrf(&page);

    // No CSRF cookie, no CSRF token, a CSRF token of another cookie, a wrong action token, no token.
    let other_cookie = format!("cronverb_csrf={}", "ab".repeat(32));
    let attempts = [
        ("", format!("csrf={token}&token=s3cret&note=n")),
        (cookie.as_str(), "token=s3cret&note=n".to_owned()),
        (
            other_cookie.as_str(),
            format!("csrf={token}&token=s3cret&note=n"),
        ),
        (cookie.as_str(), format!("csrf={token}&token=wrong&note=n")),
        (cookie.as_str(), format!("csrf={token}&note=n")),
    ];
    for (cookie, form) in &attempts {
        for action in ["pause", "trigger"] {
            let reply = post(&router, &format!("{JOB}/{action}"), cookie, form).await;
            assert_eq!(
                reply.status,
                StatusCode::FORBIDDEN,
                "{action} {cookie} {form}"
            );
            assert!(reply.body.contains("nothing was changed"), "{}", reply.body);
        }
    }
    assert_eq!(paused(&pool).await, (false, None));
    let triggered: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "SELECT trigger_requested_at FROM cron_jobs WHERE verb = 'billing::send'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(triggered, None);

    // A read-only dashboard refuses even a complete form, and shows no form.
    let read_only = dashboard::router(store.admin());
    assert!(!get(&read_only, JOB).await.body.contains("<form"));
    let form = format!("csrf={token}&token=s3cret&note=n");
    let reply = post(&read_only, &format!("{JOB}/pause"), &cookie, &form).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(paused(&pool).await, (false, None));

    // The same form with everything right does act: the refusals above were the checks.
    let reply = post(&router, &format!("{JOB}/pause"), &cookie, &form).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(paused(&pool).await.0);
}

#[sqlx::test(migrations = false)]
async fn a_get_cannot_act(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    for action in ["pause", "resume", "trigger"] {
        let reply = get_as(&router, &format!("{JOB}/{action}?note=n"), "").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{action}");
    }
    assert_eq!(paused(&pool).await, (false, None));
}

#[sqlx::test(migrations = false)]
async fn a_pause_through_the_form_records_its_note_and_who(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    let page = get_as(&router, JOB, "").await;
    assert!(page.body.contains("/pause\""), "{}", page.body);
    let (cookie, token) = csrf(&page);

    // A pause needs a note.
    let reply = post(
        &router,
        &format!("{JOB}/pause"),
        &cookie,
        &format!("csrf={token}&note=+"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(paused(&pool).await, (false, None));

    // Without the hook's header, the request may not act.
    let request = Request::post(format!("{JOB}/pause"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, &cookie)
        .body(Body::from(format!("csrf={token}&note=disk")))
        .unwrap();
    assert_eq!(send(&router, request).await.status, StatusCode::FORBIDDEN);
    assert_eq!(paused(&pool).await, (false, None));

    let reply = post(
        &router,
        &format!("{JOB}/pause"),
        &cookie,
        &format!("csrf={token}&note=disk+%3Cb%3Efull%3C%2Fb%3E"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(reply.headers[header::LOCATION], JOB);
    assert_eq!(
        paused(&pool).await,
        (true, Some("disk <b>full</b> (paused by alice)".to_owned()))
    );
    let page = get_as(&router, JOB, &cookie).await;
    assert!(
        page.body
            .contains("disk &#60;b&#62;full&#60;/b&#62; (paused by alice)"),
        "{}",
        page.body
    );
    assert!(page.body.contains("/resume\""));

    let reply = post(
        &router,
        &format!("{JOB}/resume"),
        &cookie,
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(paused(&pool).await, (false, None));
}

#[sqlx::test(migrations = false)]
async fn keyset_pages_do_not_overlap(pool: PgPool) {
    let store = seed(&pool).await;
    runs(&pool, 120, "succeeded", None).await;
    let router = dashboard::router(store.admin());
    let mut path = JOB.to_owned();
    let mut seen: Vec<i64> = Vec::new();
    let mut pages = 0;
    loop {
        let reply = get(&router, &path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        pages += 1;
        assert!(pages <= 3, "the pages do not end: {seen:?}");
        let ids: Vec<i64> = reply
            .body
            .split("<tr class=\"run\">\n<td>")
            .skip(1)
            .map(|rest| rest.split('<').next().unwrap().parse().unwrap())
            .collect();
        seen.extend(ids);
        match reply.body.split("class=\"older\" href=\"").nth(1) {
            Some(rest) => path = rest.split('"').next().unwrap().replace("&#38;", "&"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 120);
    // Newest first, each run once: the ids were inserted oldest last.
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 120);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

#[sqlx::test(migrations = false)]
async fn nested_under_a_prefix(pool: PgPool) {
    let store = seed(&pool).await;
    runs(&pool, 60, "succeeded", None).await;
    let app = Router::new().nest("/cron", with_hook(&store));
    let overview = get_as(&app, "/cron", "").await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(
        overview.body.contains(&format!("href=\"/cron{JOB}\"")),
        "{}",
        overview.body
    );
    assert!(
        overview
            .body
            .contains("href=\"/cron/static/dashboard.css\"")
    );
    assert!(overview.body.contains("src=\"/cron/static/dashboard.js\""));
    assert!(overview.body.contains("href=\"/cron/deployments/v1\""));
    assert!(
        overview.headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Path=/cron;")
    );

    let job = get_as(&app, &format!("/cron{JOB}"), "").await;
    assert_eq!(job.status, StatusCode::OK);
    assert!(job.body.contains(&format!("action=\"/cron{JOB}/pause\"")));
    assert!(job.body.contains(&format!("href=\"/cron{JOB}?before=")));
    for path in [
        "/cron/static/dashboard.css",
        "/cron/static/dashboard.js",
        "/cron/deployments/v1",
    ] {
        assert_eq!(
            get_as(&app, path, "").await.status,
            StatusCode::OK,
            "{path}"
        );
    }
    let (cookie, token) = csrf(&job);
    let reply = post(
        &app,
        &format!("/cron{JOB}/pause"),
        &cookie,
        &format!("csrf={token}&note=n"),
    )
    .await;
    assert_eq!(
        reply.headers[header::LOCATION],
        format!("/cron{JOB}").as_str()
    );
}

/// Waits up to 10 s for the runtime's health to say it is ready.
async fn until_ready(handle: &cronverb::RuntimeHandle) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !handle.health().ready {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready within 10 s: {:?}",
            handle.health()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn json(reply: &Reply) -> serde_json::Value {
    assert_eq!(
        reply.headers[header::CONTENT_TYPE],
        "application/json",
        "{}",
        reply.body
    );
    serde_json::from_str(&reply.body).unwrap()
}

#[tokio::test]
async fn the_probes_answer_200_while_running_and_503_once_shut_down() {
    let runtime = cronverb::Runtime::builder()
        .registered_jobs(false)
        .module("probe")
        .job("probe::tick", "* * * * * *", || async {})
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let probes = dashboard::health(&handle);
    until_ready(&handle).await;

    let live = get(&probes, "/health/live").await;
    assert_eq!(live.status, StatusCode::OK, "{}", live.body);
    assert_eq!(json(&live)["live"], true);
    let ready = get(&probes, "/health/ready").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.body);
    let body = json(&ready);
    assert_eq!(body["ready"], true);
    assert_eq!(body["registered"], true);
    assert_eq!(body["store"]["reachable"], true);

    handle.shutdown().await.unwrap();
    let ready = get(&probes, "/health/ready").await;
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        ready.body
    );
    assert_eq!(json(&ready)["draining"], true);
    let live = get(&probes, "/health/live").await;
    assert_eq!(
        live.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        live.body
    );
    assert_eq!(json(&live)["stopped"], true);
}

#[sqlx::test(migrations = false)]
async fn the_dashboard_serves_the_probes_only_when_given_the_runtime(pool: PgPool) {
    let store = seed(&pool).await;
    let without = Dashboard::new(store.admin()).router();
    assert_eq!(
        get(&without, "/health/live").await.status,
        StatusCode::NOT_FOUND
    );

    let runtime = cronverb::Runtime::builder()
        .registered_jobs(false)
        .module("probe")
        .job("probe::tick", "* * * * * *", || async {})
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    until_ready(&handle).await;
    let app = Router::new().nest(
        "/cron",
        Dashboard::new(store.admin()).runtime(&handle).router(),
    );
    for path in ["/cron/health/live", "/cron/health/ready"] {
        let reply = get(&app, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
        assert_eq!(reply.headers[header::CACHE_CONTROL], "no-store", "{path}");
    }
    assert_eq!(get(&app, "/cron").await.status, StatusCode::OK);
    handle.shutdown().await.unwrap();
}
