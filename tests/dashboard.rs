//! The dashboard's router against a real PostgreSQL server, one fresh database per test
//! (`#[sqlx::test]`, which needs `DATABASE_URL`): escaping, headers, the refusals of actions, a pause
//! through the form, keyset pages, nesting; the banners, counts, relative times, filters and pages of
//! the overview; the action token's session, its strength and throttle; the log's escaping and the
//! header-read timeout (docs/dashboard.md).

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
/// An action token of the minimum strength (`openssl rand -hex 16`).
const TOKEN: &str = "3f9c2a7e51b04d8e9a6c1f7b2d5e8a03";

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

/// The dashboard whose actions need the action token [`TOKEN`].
fn with_token(store: &PgStore) -> Router {
    Dashboard::new(store.admin())
        .action_token(TOKEN)
        .unwrap()
        .router()
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
    // A hostile actor and note in the audit trail.
    store
        .admin()
        .with_actor(cronverb::admin::Actor::new(
            XSS,
            cronverb::admin::Origin::Api,
        ))
        .pause("billing::send", None, Some(XSS))
        .await
        .unwrap();
    let router = dashboard::router(store.admin());
    for path in ["/", JOB, "/audit", "/audit?verb=billing%3A%3Asend"] {
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

/// Posts `form` with `cookie` to the job's `action`: refused with 403, saying nothing was changed.
async fn refused(router: &Router, action: &str, cookie: &str, form: &str) {
    let reply = post(router, &format!("{JOB}/{action}"), cookie, form).await;
    assert_eq!(
        reply.status,
        StatusCode::FORBIDDEN,
        "{action} {cookie} {form}"
    );
    assert!(reply.body.contains("nothing was changed"), "{}", reply.body);
}

#[sqlx::test(migrations = false)]
async fn actions_without_csrf_or_token_change_nothing(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_token(&store);
    let page = get(&router, JOB).await;
    let (cookie, token) = csrf(&page);
    // A backfill queued already (Monday 2 to Saturday 7 March: five occurrences of `0 2 * * 1-5`), so
    // that a `backfill/cancel` let through would show: the refusals must leave it queued.
    let (from, to) = ("2026-03-02T00:00:00Z", "2026-03-07T00:00:00Z");
    store
        .admin()
        .backfill(
            "billing::send",
            Some("billing"),
            from.parse().unwrap(),
            to.parse().unwrap(),
            false,
        )
        .await
        .unwrap();
    assert_eq!(queued(&pool).await, 5);

    // No CSRF cookie, no CSRF token, a CSRF token of another cookie, a wrong action token, no token.
    let other_cookie = format!("cronverb_csrf={}", "ab".repeat(32));
    // A backfill's window rides along in every form: `backfill` reads it. It is the week after the
    // one queued, so that a `backfill` let through would queue five more.
    // So does a reschedule's expression, which a `reschedule` let through would run.
    let window = "from=2026-03-09T00%3A00%3A00Z&to=2026-03-14T00%3A00%3A00Z\
        &expression=*%2F30+*+*+*+*";
    let attempts = [
        ("", format!("csrf={token}&token={TOKEN}&note=n&{window}")),
        (cookie.as_str(), format!("token={TOKEN}&note=n&{window}")),
        (
            other_cookie.as_str(),
            format!("csrf={token}&token={TOKEN}&note=n&{window}"),
        ),
        (
            cookie.as_str(),
            format!("csrf={token}&token=wrong&note=n&{window}"),
        ),
        (cookie.as_str(), format!("csrf={token}&note=n&{window}")),
    ];
    for (cookie, form) in &attempts {
        for action in [
            "pause",
            "trigger",
            "backfill",
            "backfill/cancel",
            "reschedule",
            "reschedule/reset",
        ] {
            // Two more wrong tokens would lock wrong tokens out (`session.rs`), the right one at the
            // end too: the reschedule actions meet every other refusal.
            if action.starts_with("reschedule") && form.contains("token=wrong") {
                continue;
            }
            refused(&router, action, cookie, form).await;
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
    assert_eq!(
        queued(&pool).await,
        5,
        "no backfill was queued and none was cancelled"
    );
    assert_eq!(schedule(&pool).await, ("0 2 * * 1-5".to_owned(), None));
    assert_eq!(
        dashboard_rows(&pool).await,
        0,
        "a refused action writes no row"
    );

    // A read-only dashboard refuses even a complete form, and shows no form.
    let read_only = dashboard::router(store.admin());
    assert!(!get(&read_only, JOB).await.body.contains("<form"));
    let form = format!("csrf={token}&token={TOKEN}&note=n");
    let reply = post(&read_only, &format!("{JOB}/pause"), &cookie, &form).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(paused(&pool).await, (false, None));

    // The same form with everything right does act: the refusals above were the checks.
    let reply = post(&router, &format!("{JOB}/pause"), &cookie, &form).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(paused(&pool).await.0);
    assert_eq!(dashboard_rows(&pool).await, 1);

    // Resume, on the verb now paused, meets the same refusals (not the wrong token, for the lockout
    // above) and leaves it paused, with no row.
    for (cookie, form) in attempts
        .iter()
        .filter(|(_, form)| !form.contains("token=wrong"))
    {
        refused(&router, "resume", cookie, form).await;
    }
    assert!(
        paused(&pool).await.0,
        "a refused resume leaves the verb paused"
    );
    assert_eq!(
        dashboard_rows(&pool).await,
        1,
        "a refused resume writes no row"
    );
}

/// The schedule `billing::send` runs, and the code's where that is an override.
async fn schedule(pool: &PgPool) -> (String, Option<String>) {
    sqlx::query_as("SELECT schedule, code_schedule FROM cron_jobs WHERE verb = 'billing::send'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_reschedule_through_the_form_shows_the_drift_everywhere_and_resets(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    let page = get_as(&router, JOB, "").await;
    assert!(page.body.contains("/reschedule\""), "{}", page.body);
    assert!(!page.body.contains("/reschedule/reset\""), "{}", page.body);
    let (cookie, token) = csrf(&page);

    // An expression that does not parse is refused with the engine's message, and nothing changes.
    let reply = post(
        &router,
        &format!("{JOB}/reschedule"),
        &cookie,
        &format!("csrf={token}&expression=61+*+*+*+*"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(reply.body.contains("61"), "{}", reply.body);
    assert_eq!(schedule(&pool).await, ("0 2 * * 1-5".to_owned(), None));

    // Hostile text in the note is escaped wherever it is shown.
    let note = XSS
        .replace(' ', "+")
        .replace('<', "%3C")
        .replace('>', "%3E")
        .replace('=', "%3D");
    let reply = post(
        &router,
        &format!("{JOB}/reschedule"),
        &cookie,
        &format!("csrf={token}&expression=*%2F30+*+*+*+*&note={note}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(
        schedule(&pool).await,
        ("*/30 * * * *".to_owned(), Some("0 2 * * 1-5".to_owned()))
    );
    let page = get_as(&router, JOB, &cookie).await;
    assert!(
        page.body
            .contains("the code says 0 2 * * 1-5 in UTC; this override was set by "),
        "{}",
        page.body
    );
    assert!(!page.body.contains(XSS), "{}", page.body);
    assert!(page.body.contains("/reschedule/reset\""), "{}", page.body);
    let overview = get_as(&router, "/", &cookie).await;
    assert!(
        row(&overview.body, "billing::send").contains("overridden"),
        "the overview's badge: {}",
        overview.body
    );
    assert!(!row(&overview.body, "billing::other").contains("overridden"));

    let reply = post(
        &router,
        &format!("{JOB}/reschedule/reset"),
        &cookie,
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(schedule(&pool).await, ("0 2 * * 1-5".to_owned(), None));
    let actions: Vec<String> =
        sqlx::query_scalar("SELECT action FROM cron_audit WHERE origin = 'dashboard' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(actions, ["reschedule", "reset"]);
}

/// A job its code declares `fixed` has no reschedule form, and a reschedule posted anyway is refused
/// with the reason, changes nothing and writes no audit row.
#[sqlx::test(migrations = false)]
async fn a_fixed_job_has_no_reschedule_form_and_refuses_one(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let schema = Schema::new([(
        "billing",
        Verb::new("billing::send", Cron::new("0 2 * * 1-5").fixed(true)),
    )]);
    store.admin().deploy("v1", &schema, None).await.unwrap();
    let router = with_hook(&store);
    let page = get_as(&router, JOB, "").await;
    assert!(page.body.contains("/trigger\""), "{}", page.body);
    assert!(!page.body.contains("/reschedule\""), "{}", page.body);
    let (cookie, token) = csrf(&page);
    let reply = post(
        &router,
        &format!("{JOB}/reschedule"),
        &cookie,
        &format!("csrf={token}&expression=*%2F30+*+*+*+*"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(reply.body.contains("is declared"), "{}", reply.body);
    assert_eq!(schedule(&pool).await, ("0 2 * * 1-5".to_owned(), None));
    assert_eq!(dashboard_rows(&pool).await, 0);
}

/// A reschedule whose expression does not parse is refused with `cronverb check`'s diagnostic: the
/// message, then the expression with the caret under what is wrong, preformatted and escaped.
#[sqlx::test(migrations = false)]
async fn a_reschedule_that_does_not_parse_shows_the_caret_as_check_does(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    let page = get_as(&router, JOB, "").await;
    let (cookie, token) = csrf(&page);
    // `0 2 * * <b>`: the day of week is hostile text.
    let reply = post(
        &router,
        &format!("{JOB}/reschedule"),
        &cookie,
        &format!("csrf={token}&expression=0+2+*+*+%3Cb%3E"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(
        reply.body.contains("<pre class=\"diagnostic\">error: "),
        "{}",
        reply.body
    );
    assert!(
        reply
            .body
            .contains("\n  |\n1 | 0 2 * * &#60;b&#62;\n  |         ^^^</pre>"),
        "{}",
        reply.body
    );
    assert!(!reply.body.contains("<b>"), "{}", reply.body);
    assert_eq!(schedule(&pool).await, ("0 2 * * 1-5".to_owned(), None));
    assert_eq!(dashboard_rows(&pool).await, 0);
}

/// How many rows of the audit trail the dashboard wrote.
async fn dashboard_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM cron_audit WHERE origin = 'dashboard'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_get_cannot_act(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    for action in [
        "pause",
        "resume",
        "trigger",
        "cancel",
        "backfill",
        "backfill/cancel",
    ] {
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

    // The audit page, linked from the overview and, filtered by verb, from the job's page.
    assert!(
        get_as(&router, "/", "")
            .await
            .body
            .contains("href=\"/audit\"")
    );
    let audit_link = "href=\"/audit?verb=billing%3A%3Asend\"";
    assert!(page.body.contains(audit_link), "{}", page.body);
    let audit = get_as(&router, "/audit?verb=billing%3A%3Asend", "").await;
    assert_eq!(audit.status, StatusCode::OK);
    let rows: Vec<&str> = audit.body.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 2, "{}", audit.body);
    assert!(
        rows[0].contains("alice") && rows[0].contains("resume"),
        "{}",
        rows[0]
    );
    assert!(rows[0].contains("dashboard on "), "{}", rows[0]);
    assert!(rows[1].contains("pause"), "{}", rows[1]);
    assert!(
        rows[1].contains("disk &#60;b&#62;full&#60;/b&#62; (paused by alice)"),
        "{}",
        rows[1]
    );
    // The deploy of the seed is the module's, not the verb's: only the whole trail lists it.
    let whole = get_as(&router, "/audit", "").await;
    assert_eq!(
        whole.body.split("<tr>").skip(2).count(),
        3,
        "{}",
        whole.body
    );
}

/// How many occurrences are queued for a backfill.
async fn queued(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM cron_backfills")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_backfill_through_the_form_is_queued_shown_and_cancelled(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_hook(&store);
    let page = get_as(&router, JOB, "").await;
    assert!(page.body.contains("/backfill\""), "{}", page.body);
    assert!(!page.body.contains("/backfill/cancel\""), "{}", page.body);
    let (cookie, token) = csrf(&page);

    // A window that is not RFC 3339 is refused, and nothing is queued.
    let reply = post(
        &router,
        &format!("{JOB}/backfill"),
        &cookie,
        &format!("csrf={token}&from=monday&to=friday"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.contains("RFC 3339"), "{}", reply.body);
    assert_eq!(queued(&pool).await, 0);

    // Monday to Saturday: `0 2 * * 1-5` runs five times.
    let window = "from=2026-03-02T00%3A00%3A00Z&to=2026-03-07T00%3A00%3A00Z";
    let reply = post(
        &router,
        &format!("{JOB}/backfill"),
        &cookie,
        &format!("csrf={token}&{window}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(reply.headers[header::LOCATION], JOB);
    assert_eq!(queued(&pool).await, 5);
    let page = get_as(&router, JOB, &cookie).await;
    assert!(
        page.body
            .contains("backfill: 5 occurrence(s) queued, the next 2026-03-02 02:00:00 UTC"),
        "{}",
        page.body
    );
    assert!(page.body.contains("/backfill/cancel\""), "{}", page.body);

    let reply = post(
        &router,
        &format!("{JOB}/backfill/cancel"),
        &cookie,
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(queued(&pool).await, 0);
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

/// A live replica of deployment `v1`: a runner row whose heartbeat is now.
async fn live_replica(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO cron_runners (deployment_id, host, pid) \
         SELECT id, 'web-1', 4242 FROM cron_deployments WHERE key = 'v1'",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// The `tr.job` rows of a page, each as its HTML.
fn job_rows(body: &str) -> Vec<&str> {
    body.split("<tr class=\"job")
        .skip(1)
        .map(|rest| rest.split("</tr>").next().unwrap())
        .collect()
}

/// The row of `verb` on a page.
fn row<'a>(body: &'a str, verb: &str) -> &'a str {
    job_rows(body)
        .into_iter()
        .find(|row| row.contains(&format!(">{verb}</a>")))
        .unwrap_or_else(|| panic!("no row of {verb}: {body}"))
}

#[sqlx::test(migrations = false)]
async fn a_module_without_live_replicas_and_an_overdue_job_show_banners(pool: PgPool) {
    let store = seed(&pool).await;
    let router = dashboard::router(store.admin());
    // No replica: nothing of `billing` runs, and the overview and a job's page say so first.
    for path in ["/", JOB] {
        let body = get(&router, path).await.body;
        assert!(
            body.contains(
                "<div class=\"banner banner-outage\" role=\"alert\"><strong>Nothing runs in module \
                 billing:</strong> no replica of its active deployment is live"
            ),
            "{path}: {body}"
        );
        assert!(!body.contains("banner-overdue"), "{path}: {body}");
    }

    // A live replica: no banner.
    live_replica(&pool).await;
    let body = get(&router, "/").await.body;
    assert!(!body.contains("class=\"banner "), "{body}");
    assert!(body.contains("<td class=\"live\">1</td>"), "{body}");

    // A due occurrence no replica claimed: the overdue banner names the job.
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = now() - interval '46 seconds' \
         WHERE verb = 'billing::send'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let body = get(&router, "/").await.body;
    assert!(
        body.contains("<strong>1 job is overdue:</strong> billing::send (by 4"),
        "{body}"
    );
    assert!(!body.contains("banner-outage"), "{body}");
}

#[sqlx::test(migrations = false)]
async fn the_overview_counts_each_modules_runs_of_the_last_24_hours(pool: PgPool) {
    let store = seed(&pool).await;
    // Of `billing::send`: 3 failed, then 5 succeeded, then 1 timed out, one a minute back from an hour
    // ago; the latest failed.
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome, \
                                    runner, runner_id) \
         SELECT 'billing', 'billing::send', t, t, t + interval '1 second', \
                CASE WHEN i <= 3 THEN 'failed' WHEN i <= 8 THEN 'succeeded' ELSE 'timed_out' END, \
                'host:1', 1 \
         FROM generate_series(1, 9) AS i, \
              LATERAL (SELECT now() - interval '1 hour' - i * interval '1 minute' AS t) s",
    )
    .execute(&pool)
    .await
    .unwrap();
    // Two days ago: not counted.
    sqlx::query(
        "INSERT INTO cron_job_runs (module_name, verb, scheduled_at, started_at, finished_at, outcome, \
                                    runner, runner_id) \
         VALUES ('billing', 'billing::other', now() - interval '2 days', now() - interval '2 days', \
                 now() - interval '2 days', 'panicked', 'host:1', 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let body = get(&dashboard::router(store.admin()), "/").await.body;
    let counts = body
        .split("<td class=\"counts\">")
        .nth(1)
        .and_then(|rest| rest.split("</td>").next())
        .unwrap_or_else(|| panic!("no counts: {body}"));
    assert_eq!(
        counts,
        "<span class=\"count outcome-succeeded\" data-outcome=\"succeeded\">5 succeeded</span> · \
         <span class=\"count outcome-failed\" data-outcome=\"failed\">3 failed</span> · \
         <span class=\"count outcome-timed_out\" data-outcome=\"timed_out\">1 timed out</span>"
    );
    // The module's row also counts its jobs whose last run failed, whenever it ran: both.
    assert!(
        body.contains("2 jobs · <span class=\"count outcome-failed\">2 failing</span>"),
        "{body}"
    );
}

#[sqlx::test(migrations = false)]
async fn times_are_shown_relative_beside_absolute(pool: PgPool) {
    let store = seed(&pool).await;
    runs(&pool, 1, "succeeded", None).await;
    let body = get(&dashboard::router(store.admin()), "/").await.body;
    let send = row(&body, "billing::send");
    // The next run, in its zone and relative to the database's clock, which the page carries.
    let next = send
        .split("<time class=\"rel\" datetime=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no relative next run: {send}"));
    let text = next.split('>').nth(1).unwrap().split('<').next().unwrap();
    assert!(
        text.starts_with("in ")
            && (text.ends_with(" min") || text.ends_with(" h") || text.ends_with(" d")),
        "{text}"
    );
    // The last run: an hour and a minute ago.
    assert!(send.contains(">1 h ago</time>"), "{send}");
    assert!(body.contains(" data-now=\""), "{body}");
}

#[sqlx::test(migrations = false)]
async fn a_paused_job_shows_paused_instead_of_a_next_run(pool: PgPool) {
    let store = seed(&pool).await;
    store
        .admin()
        .pause("billing::send", Some("billing"), Some("disk full"))
        .await
        .unwrap();
    let body = get(&dashboard::router(store.admin()), "/").await.body;
    let next = |verb: &str| {
        row(&body, verb)
            .split("<td class=\"next-run\">")
            .nth(1)
            .unwrap()
            .split("</td>")
            .next()
            .unwrap()
            .to_owned()
    };
    let paused = next("billing::send");
    assert!(
        paused.contains("<span class=\"paused-mark\">paused</span>"),
        "{paused}"
    );
    assert!(
        !paused.contains("<time"),
        "a paused job shows a next run: {paused}"
    );
    assert!(next("billing::other").contains("<time datetime="));
}

#[sqlx::test(migrations = false)]
async fn the_overview_filters_by_verb_and_state(pool: PgPool) {
    let store = seed(&pool).await;
    live_replica(&pool).await;
    let router = dashboard::router(store.admin());
    let verbs = |body: &str| -> Vec<String> {
        job_rows(body)
            .iter()
            .map(|row| {
                row.split("class=\"verb\" href=\"")
                    .nth(1)
                    .unwrap()
                    .split('>')
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(
        verbs(&get(&router, "/").await.body),
        ["billing::other", "billing::send"]
    );
    assert_eq!(
        verbs(&get(&router, "/?q=OTH").await.body),
        ["billing::other"]
    );
    assert_eq!(
        verbs(&get(&router, "/?q=nothing").await.body),
        Vec::<String>::new()
    );
    for state in ["failing", "overdue", "paused"] {
        let body = get(&router, &format!("/?state={state}")).await.body;
        assert_eq!(verbs(&body), Vec::<String>::new(), "{state}");
        assert!(
            body.contains("No job of the 2 matches the filter."),
            "{body}"
        );
    }

    runs(&pool, 1, "panicked", Some("boom")).await;
    store
        .admin()
        .pause("billing::other", Some("billing"), Some("n"))
        .await
        .unwrap();
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = now() - interval '1 minute' WHERE verb = 'billing::send'",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(
        verbs(&get(&router, "/?state=failing").await.body),
        ["billing::send"]
    );
    assert_eq!(
        verbs(&get(&router, "/?state=overdue").await.body),
        ["billing::send"]
    );
    let body = get(&router, "/?q=billing&state=paused").await.body;
    assert_eq!(verbs(&body), ["billing::other"]);
    // The form shows the filter applied.
    assert!(body.contains("name=\"q\" value=\"billing\""), "{body}");
    assert!(
        body.contains("<option value=\"paused\" selected>"),
        "{body}"
    );

    let reply = get(&router, "/?state=broken").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply
            .body
            .contains("unknown state `broken`; expected one of"),
        "{}",
        reply.body
    );
}

/// Registers deployment `big` of module `bulk` with `jobs` jobs, active.
async fn many_jobs(store: &PgStore, pool: &PgPool, jobs: usize) {
    let schema = Schema::new((0..jobs).map(|i| {
        (
            "bulk",
            Verb::new(
                format!("bulk::job_{i:05}").as_str(),
                Cron::new("*/5 * * * *"),
            ),
        )
    }));
    store.admin().deploy("big", &schema, None).await.unwrap();
    sqlx::query(
        "UPDATE cron_deployments SET active = true, activated_at = now() WHERE key = 'big'",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrations = false)]
async fn the_overview_shows_a_page_of_jobs_at_a_time(pool: PgPool) {
    let store = seed(&pool).await;
    many_jobs(&store, &pool, 250).await;
    let router = dashboard::router(store.admin());
    let first = get(&router, "/").await.body;
    assert_eq!(job_rows(&first).len(), 100);
    assert!(first.contains("Jobs 1–100 of 252, page 1 of 3."), "{first}");
    assert!(
        first.contains("<a class=\"next\" href=\"/?page=2\">"),
        "{first}"
    );
    let last = get(&router, "/?page=3").await.body;
    assert_eq!(job_rows(&last).len(), 52);
    assert!(
        last.contains("<a class=\"previous\" href=\"/?page=2\">"),
        "{last}"
    );
    assert!(!last.contains("class=\"next\""), "{last}");
    // The filter carries over to the pages' links; a page past the last shows the last.
    let filtered = get(&router, "/?q=bulk%3A%3A").await.body;
    assert_eq!(job_rows(&filtered).len(), 100);
    assert!(
        filtered.contains("Jobs 1–100 of 250 matching the filter (of 252), page 1 of 3."),
        "{filtered}"
    );
    assert!(
        filtered.contains("href=\"/?q=bulk%3A%3A&#38;page=2\""),
        "{filtered}"
    );
    assert_eq!(job_rows(&get(&router, "/?page=99").await.body).len(), 52);
    // Every module is in the table of modules, whichever page.
    assert!(last.contains("href=\"#module-billing\""), "{last}");
}

/// The `name=value` of each cookie a reply sets, and their attributes.
fn set_cookies(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn the_action_token_is_entered_once_per_session(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_token(&store);
    // Without a session, the job's page asks for the token instead of showing the actions.
    let page = get(&router, JOB).await;
    let (csrf_cookie, token) = csrf(&page);
    assert!(page.body.contains("action=\"/session\""), "{}", page.body);
    assert!(!page.body.contains("/pause\""), "{}", page.body);
    assert!(
        page.body
            .contains("name=\"next\" value=\"/jobs/billing/billing%3A%3Asend\"")
    );

    // A wrong token opens nothing.
    let reply = post(
        &router,
        "/session",
        &csrf_cookie,
        &format!("csrf={token}&token=wrong&next={JOB}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(
        set_cookies(&reply)
            .iter()
            .all(|c| !c.starts_with("cronverb_session="))
    );
    // Nor the right one without the CSRF token.
    let reply = post(&router, "/session", &csrf_cookie, &format!("token={TOKEN}")).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);

    // The right one sets the session cookie and goes back to the page.
    let form = format!("csrf={token}&token={TOKEN}&next=%2Fjobs%2Fbilling%2Fbilling%253A%253Asend");
    let reply = post(&router, "/session", &csrf_cookie, &form).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(reply.headers[header::LOCATION], JOB);
    let set = set_cookies(&reply);
    let session = set
        .iter()
        .find(|c| c.starts_with("cronverb_session="))
        .unwrap_or_else(|| panic!("{set:?}"));
    assert!(
        session.ends_with("; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200"),
        "{session}"
    );
    let session_cookie = session.split(';').next().unwrap();
    let cookies = format!("{csrf_cookie}; {session_cookie}");

    // The actions, without a token field; an action needs only the CSRF token.
    let page = get_as(&router, JOB, &cookies).await;
    assert!(page.body.contains("/pause\""), "{}", page.body);
    assert!(!page.body.contains("name=\"token\""), "{}", page.body);
    let reply = post(
        &router,
        &format!("{JOB}/pause"),
        &cookies,
        &format!("csrf={token}&note=disk"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(paused(&pool).await.0);
    // Still CSRF-protected.
    let reply = post(&router, &format!("{JOB}/resume"), &cookies, "").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(paused(&pool).await.0);
    // A session cookie of another router (a restart) is not one.
    let other = with_token(&store);
    let reply = post(&other, &format!("{JOB}/resume"), &cookies, "").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);

    // Over TLS (as a proxy says), the cookies are `Secure`.
    let request = Request::post("/session")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, &csrf_cookie)
        .header("x-forwarded-proto", "https")
        .body(Body::from(format!("csrf={token}&token={TOKEN}")))
        .unwrap();
    let reply = send(&router, request).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert!(
        set_cookies(&reply)[0].ends_with("; Secure"),
        "{:?}",
        set_cookies(&reply)
    );
    let request = Request::get(JOB)
        .header("x-forwarded-proto", "https")
        .body(Body::empty())
        .unwrap();
    assert!(set_cookies(&send(&router, request).await)[0].ends_with("; Secure"));

    // Ending the session clears the cookie.
    let reply = post(
        &router,
        "/session/end",
        &cookies,
        &format!("csrf={token}&next={JOB}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert!(
        set_cookies(&reply)[0]
            .starts_with("cronverb_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
    );
}

#[sqlx::test(migrations = false)]
async fn weak_action_tokens_are_refused(pool: PgPool) {
    let store = seed(&pool).await;
    for weak in [
        "a",
        "s3cret",
        "browser-test-token",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ] {
        let refused = Dashboard::new(store.admin())
            .action_token(weak)
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("the action token is too weak: "),
            "{refused}"
        );
    }
}

/// `cronverb dashboard --allow-actions a` refuses to start, saying why and what would do.
#[cfg(feature = "cli")]
#[test]
fn the_command_refuses_a_weak_action_token() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args([
            "dashboard",
            "--listen",
            "127.0.0.1:0",
            "--allow-actions",
            "a",
        ])
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr,
        "error: `--allow-actions`: the action token is too weak: 1 character, about 0 bits \
         estimated; it needs at least 16 characters and 80 bits, such as a random string from \
         `openssl rand -hex 16`\n"
    );
}

#[sqlx::test(migrations = false)]
async fn repeated_wrong_tokens_are_throttled(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_token(&store);
    let (cookie, csrf_token) = csrf(&get(&router, JOB).await);
    let mut statuses = Vec::new();
    for guess in 0..30 {
        let form = format!("csrf={csrf_token}&token=guess{guess:04}&note=n");
        statuses.push(
            post(&router, &format!("{JOB}/pause"), &cookie, &form)
                .await
                .status,
        );
    }
    // Five refused as wrong, then every guess refused unchecked.
    assert!(
        statuses[..5].iter().all(|s| *s == StatusCode::FORBIDDEN),
        "{statuses:?}"
    );
    assert!(
        statuses[5..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    // While locked, even the right token is refused (a guess cannot tell it found it), with when to
    // try again.
    let form = format!("csrf={csrf_token}&token={TOKEN}&note=n");
    let reply = post(&router, &format!("{JOB}/pause"), &cookie, &form).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(reply.headers.contains_key(header::RETRY_AFTER));
    assert!(
        reply
            .body
            .contains("too many wrong action tokens: try again in "),
        "{}",
        reply.body
    );
    let reply = post(
        &router,
        "/session",
        &cookie,
        &format!("csrf={csrf_token}&token={TOKEN}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(paused(&pool).await, (false, None));
}

/// A `tracing` writer into a buffer the test reads.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[sqlx::test(migrations = false)]
async fn request_derived_text_is_logged_escaped(pool: PgPool) {
    let store = seed(&pool).await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let router = with_hook(&store);
    // A refused action (no CSRF token) logs the path's module and verb: a newline and a forged line in
    // one, an ESC sequence (clear the screen, retitle the window) in the other.
    let forged = "/jobs/billing%0A2026-01-01T00:00:00Z%20INFO%20cronverb::dashboard:%20forged/\
                  send%1B%5B2J%1B%5D0;owned%07/pause";
    let reply = post(&router, forged, "", "note=n").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // A failed action (an unknown verb) logs the error naming it.
    let page = get_as(&router, JOB, "").await;
    let (cookie, token) = csrf(&page);
    let reply = post(
        &router,
        "/jobs/billing/nope%0AINFO%20forged%1B%5B31m/trigger",
        &cookie,
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("dashboard action refused"), "{log}");
    assert!(log.contains("dashboard action failed"), "{log}");
    assert!(!log.contains('\u{1b}') && !log.contains('\u{7}'), "{log:?}");
    for line in log.lines() {
        assert!(
            line.contains(" WARN "),
            "a line of the log is forged: {line:?}\n{log}"
        );
    }
    assert!(
        log.contains(r"billing\n2026-01-01T00:00:00Z INFO cronverb::dashboard: forged"),
        "{log}"
    );
    assert!(log.contains(r"send\u{1b}[2J\u{1b}]0;owned\u{7}"), "{log}");
}

/// Serves `router` with [`dashboard::serve`] and a header-read timeout of one second; returns its
/// address.
async fn serve_with_timeout(router: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(dashboard::serve(
        listener,
        router,
        std::time::Duration::from_secs(1),
        std::future::pending(),
    ));
    address
}

#[sqlx::test(migrations = false)]
async fn a_connection_that_does_not_finish_its_headers_is_closed(pool: PgPool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let store = seed(&pool).await;
    let address = serve_with_timeout(dashboard::router(store.admin())).await;
    // A whole request is answered.
    let mut whole = tokio::net::TcpStream::connect(address).await.unwrap();
    whole
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    whole.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // Half a request's headers, and a connection that sends nothing: both closed after the timeout.
    let mut half = tokio::net::TcpStream::connect(address).await.unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut silent = tokio::net::TcpStream::connect(address).await.unwrap();
    let started = std::time::Instant::now();
    for stream in [&mut half, &mut silent] {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.read_to_end(&mut rest),
        )
        .await;
        assert!(
            matches!(read, Ok(Ok(_)) | Ok(Err(_))),
            "the connection is still open after 5 s"
        );
        assert!(
            !String::from_utf8_lossy(&rest).contains("200 OK"),
            "{rest:?}"
        );
    }
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );

    // A kept-alive connection idle after its response is closed too.
    let mut kept = tokio::net::TcpStream::connect(address).await.unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        kept.read_to_end(&mut answer),
    )
    .await;
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "the idle connection is still open after 5 s"
    );
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn serve_returns_on_shutdown_once_its_connections_are_done() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(dashboard::serve(
        listener,
        router,
        std::time::Duration::from_secs(30),
        async {
            let _ = stopped.await;
        },
    ));
    // A kept-alive connection, idle after its response.
    let mut idle = tokio::net::TcpStream::connect(address).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0; 17];
    idle.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200 OK\r\n");

    stop.send(()).unwrap();
    let result = tokio::time::timeout(std::time::Duration::from_secs(5), served)
        .await
        .expect("serve did not return within 5 s of the shutdown");
    result.unwrap().unwrap();
    // The idle connection was closed, not left open.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        idle.read_to_end(&mut rest),
    )
    .await;
    assert!(read.is_ok(), "the idle connection is still open");
}

#[sqlx::test(migrations = false)]
async fn a_job_shows_its_missed_policy_and_catch_up_window(pool: PgPool) {
    // docs/dashboard.md: the job's row, on the overview and on its page, says what a late occurrence
    // does and how old it may be and still run (docs/runtime.md, "Missed runs").
    let store = PgStore::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let schema = Schema::new([
        (
            "billing",
            Verb::new(
                "billing::rollup",
                Cron::new("0 * * * *")
                    .missed(cronverb::MissedPolicy::All)
                    .catch_up("2h"),
            ),
        ),
        (
            "billing",
            Verb::new("billing::send", Cron::new("0 2 * * 1-5")),
        ),
    ]);
    store.admin().deploy("v1", &schema, None).await.unwrap();
    let router = dashboard::router(store.admin());
    for path in ["/", "/jobs/billing/billing%3A%3Arollup", JOB] {
        let body = get(&router, path).await.body;
        if path != JOB {
            assert!(
                row(&body, "billing::rollup")
                    .contains("<div class=\"muted\">UTC, missed: all, catch-up window 2h</div>"),
                "{path}: {body}"
            );
        }
        if path != "/jobs/billing/billing%3A%3Arollup" {
            assert!(
                row(&body, "billing::send")
                    .contains("<div class=\"muted\">UTC, missed: once</div>"),
                "{path}: {body}"
            );
        }
    }
}

/// Puts a run of `billing::send` in flight, started a second ago, as a replica's claim would; its id.
async fn run_in_flight(pool: &PgPool) -> i64 {
    let run_id: i64 = sqlx::query_scalar(
        "INSERT INTO cron_job_runs (job_id, deployment_id, module_name, verb, scheduled_at, \
             claimed_at, started_at, outcome, runner, runner_id) \
         SELECT id, deployment_id, module_name, verb, now() - interval '1 second', \
             now() - interval '1 second', now() - interval '1 second', 'running', 'r1', 1 \
         FROM cron_jobs WHERE verb = 'billing::send' RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE cron_jobs SET state = 'executing', current_run_id = $1, \
             lease_expires_at = now() + interval '30 seconds' \
         WHERE verb = 'billing::send'",
    )
    .bind(run_id)
    .execute(pool)
    .await
    .unwrap();
    run_id
}

/// Who asked run `run_id` to stop, and why.
async fn cancel_request(pool: &PgPool, run_id: i64) -> (Option<String>, Option<String>) {
    sqlx::query_as("SELECT cancel_requested_by, cancel_note FROM cron_job_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_cancel_needs_the_action_token_and_records_who_asked(pool: PgPool) {
    let store = seed(&pool).await;
    // The job's page offers the form while a run is in flight, and only then.
    let hooked = with_hook(&store);
    assert!(!get_as(&hooked, JOB, "").await.body.contains("/cancel\""));
    let run_id = run_in_flight(&pool).await;
    let page = get_as(&hooked, JOB, "").await;
    assert!(
        page.body.contains(&format!("{JOB}/cancel\"")),
        "{}",
        page.body
    );
    let router = with_token(&store);
    let page = get(&router, JOB).await;
    let (cookie, token) = csrf(&page);
    let note = format!("note={}", urlencode(XSS));
    // No CSRF cookie, no CSRF token, a wrong action token, no token: refused, nothing changed, no row.
    for (cookie, form) in [
        ("", format!("csrf={token}&token={TOKEN}&{note}")),
        (cookie.as_str(), format!("token={TOKEN}&{note}")),
        (cookie.as_str(), format!("csrf={token}&token=wrong&{note}")),
        (cookie.as_str(), format!("csrf={token}&{note}")),
    ] {
        refused(&router, "cancel", cookie, &form).await;
    }
    assert_eq!(cancel_request(&pool, run_id).await, (None, None));
    assert_eq!(
        dashboard_rows(&pool).await,
        0,
        "a refused cancel writes no row"
    );

    // With the token, the form cancels it, recorded as the token's holder with the note.
    let reply = post(
        &router,
        &format!("{JOB}/cancel"),
        &cookie,
        &format!("csrf={token}&token={TOKEN}&{note}"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(
        cancel_request(&pool, run_id).await,
        (
            Some("the holder of the action token".to_owned()),
            Some(XSS.to_owned())
        )
    );
    assert_eq!(dashboard_rows(&pool).await, 1);
    // The audit page shows the hostile note escaped.
    let audit = get(&router, "/audit").await;
    assert!(audit.body.contains("cancel"), "{}", audit.body);
    assert!(!audit.body.contains(XSS), "{}", audit.body);
}

/// `text` as a form's value.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The rows of the audit trail the dashboard wrote, oldest first: (actor, origin, action, module,
/// verb).
async fn dashboard_audit(
    pool: &PgPool,
) -> Vec<(String, String, String, Option<String>, Option<String>)> {
    sqlx::query_as(
        "SELECT actor, origin, action, module, verb FROM cron_audit \
         WHERE origin = 'dashboard' ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A trigger, a backfill and its cancel through the forms of a dashboard with an action token: each
/// writes exactly one row of the audit trail, origin `dashboard`, by the token's holder
/// (docs/dashboard.md, "Recorded").
#[sqlx::test(migrations = false)]
async fn each_trigger_and_backfill_through_the_form_writes_one_audit_row(pool: PgPool) {
    let store = seed(&pool).await;
    let router = with_token(&store);
    let page = get(&router, JOB).await;
    let (cookie, token) = csrf(&page);
    let window = "from=2026-03-02T00%3A00%3A00Z&to=2026-03-07T00%3A00%3A00Z";
    let holder = "the holder of the action token";
    let mut expected = Vec::new();
    for (action, recorded) in [
        ("trigger", "trigger"),
        ("backfill", "backfill"),
        ("backfill/cancel", "cancel_backfill"),
    ] {
        let form = format!("csrf={token}&token={TOKEN}&note=n&{window}");
        let reply = post(&router, &format!("{JOB}/{action}"), &cookie, &form).await;
        assert_eq!(
            reply.status,
            StatusCode::SEE_OTHER,
            "{action}: {}",
            reply.body
        );
        expected.push((
            holder.to_owned(),
            "dashboard".to_owned(),
            recorded.to_owned(),
            Some("billing".to_owned()),
            Some("billing::send".to_owned()),
        ));
        assert_eq!(dashboard_audit(&pool).await, expected, "after {action}");
        // No row of another origin either: the seed's deploy and the dashboard's.
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM cron_audit")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(rows, 1 + expected.len() as i64, "after {action}");
    }
    assert_eq!(queued(&pool).await, 0, "queued, then cancelled");
}
