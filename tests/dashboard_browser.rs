//! The dashboard in a real browser: headless Chromium (Debian's `chromium`, driven over WebDriver by
//! chromedriver) against the dashboard's pages served from real PostgreSQL (docs/dashboard.md).
//! scripts/test installs the browser (scripts/install-browser); without it these tests fail saying how
//! to install it.

use anyhow::Context as _;
use axum::Router;
use axum::response::Html;
use axum::routing::get;
use browser::Browser;
use fantoccini::Locator;

#[path = "support/browser.rs"]
mod browser;
#[path = "support/seed.rs"]
mod seed;

/// Serves `router` on a free loopback port until the test ends; returns its base URL.
async fn serve(router: Router) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(format!("http://{address}"))
}

/// The harness itself, apart from the dashboard: the browser starts, renders a page, reads its text,
/// runs its script and takes a screenshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_renders_a_page() -> anyhow::Result<()> {
    let page = "<!doctype html><title>harness</title><h1 id=greeting>hello</h1>\
                <script>document.getElementById('greeting').textContent += ', browser'</script>";
    let url = serve(Router::new().route("/", get(move || async move { Html(page) }))).await?;
    let browser = Browser::start().await?;
    browser.client.goto(&url).await?;
    assert_eq!(browser.client.title().await?, "harness");
    let greeting = browser.client.find(Locator::Id("greeting")).await?;
    assert_eq!(greeting.text().await?, "hello, browser");
    let shot = browser.screenshot("harness").await?;
    let png = std::fs::read(&shot).with_context(|| shot.display().to_string())?;
    assert!(
        png.starts_with(b"\x89PNG"),
        "{} is not a PNG",
        shot.display()
    );
    browser.close().await
}

/// The seeded history holds what the pages must show: every outcome, skipped counts, manual and late
/// runs, the markup error as the latest run of its job, a job executing, a paused one, a pending trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_holds_every_outcome() -> anyhow::Result<()> {
    let db = seed::Database::create(&seed::server_url(), "seed").await?;
    let seeded = seed::seed(&db.pool, &seed::estate(), 120).await?;
    let outcomes: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT outcome FROM cron_job_runs ORDER BY 1")
            .fetch_all(&db.pool)
            .await?;
    assert_eq!(
        outcomes,
        [
            "abandoned",
            "cancelled",
            "failed",
            "panicked",
            "running",
            "skipped",
            "succeeded",
            "timed_out"
        ]
    );
    let (skipped, manual, late): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE skipped > 0), count(*) FILTER (WHERE manual), \
         count(*) FILTER (WHERE late) FROM cron_job_runs",
    )
    .fetch_one(&db.pool)
    .await?;
    assert!(
        skipped > 0 && manual > 0 && late > 0,
        "{skipped} {manual} {late}"
    );
    let latest = seed_admin_runs(&db.pool, &seeded.xss).await?;
    assert_eq!(latest.error.as_deref(), Some(seed::XSS));

    let status = cron_runtime::store::postgres::PgStore::from_pool(db.pool.clone())
        .admin()
        .status(Some(&seeded.module))
        .await?;
    let job = |verb: &str| {
        status.modules[0]
            .jobs
            .iter()
            .find(|j| j.verb == verb)
            .cloned()
            .unwrap()
    };
    assert_eq!(job(&seeded.executing).state, "executing");
    assert!(job(&seeded.paused).paused);
    assert_eq!(
        job(&seeded.paused).pause_note.as_deref(),
        Some(seed::PAUSE_NOTE)
    );
    assert!(job(&seeded.triggered).trigger_requested_at.is_some());
    let plain = job(&seeded.plain);
    assert!(!plain.paused && plain.state == "idle");
    Ok(())
}

/// The latest run of `verb`, as `cronverb runs` reads it.
async fn seed_admin_runs(
    pool: &sqlx::PgPool,
    verb: &str,
) -> anyhow::Result<cron_runtime::admin::Run> {
    let runs = cron_runtime::store::postgres::PgStore::from_pool(pool.clone())
        .admin()
        .runs(&cron_runtime::admin::RunFilter {
            verb: Some(verb.to_owned()),
            limit: 1,
            ..Default::default()
        })
        .await?;
    runs.into_iter().next().context("no run")
}

/// The action token of the dashboard under test (`cronverb dashboard --allow-actions TOKEN`), of the
/// minimum strength (`openssl rand -hex 16`).
const TOKEN: &str = "8c1e5b9a2f7d4e60b3a9c5d1e7f20a4b";

/// Whether `verb` is paused in the database, and its note: (rows, paused rows, a note).
async fn paused_in_database(
    pool: &sqlx::PgPool,
    verb: &str,
) -> anyhow::Result<(i64, i64, Option<String>)> {
    Ok(sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE paused), max(pause_note) FROM cron_jobs WHERE verb = $1",
    )
    .bind(verb)
    .fetch_one(pool)
    .await?)
}

/// The text of the element `css` inside the row of the job `verb` on the page shown.
async fn cell(browser: &Browser, verb: &str, css: &str) -> anyhow::Result<String> {
    let row = browser
        .client
        .find(Locator::XPath(&format!(
            "//tr[contains(@class, 'job')][.//a[@class='verb' and text()='{verb}']]"
        )))
        .await
        .with_context(|| format!("the row of {verb}"))?;
    let element = row
        .find(Locator::Css(css))
        .await
        .with_context(|| format!("`{css}` in the row of {verb}"))?;
    Ok(element.text().await?)
}

/// No script of the page's data ran: no alert is open, and the page has no `img` element.
async fn no_injected_markup(browser: &Browser) -> anyhow::Result<()> {
    match browser.client.get_alert_text().await {
        Err(fantoccini::error::CmdError::Standard(e))
            if e.error == fantoccini::error::ErrorStatus::NoSuchAlert => {}
        other => anyhow::bail!("an alert is open, or the browser failed: {other:?}"),
    }
    let images = browser.client.find_all(Locator::Css("img")).await?;
    anyhow::ensure!(
        images.is_empty(),
        "the page has {} img elements",
        images.len()
    );
    Ok(())
}

/// What a person sees and does, in headless Chromium, on the dashboard (actions enabled with a token)
/// over real PostgreSQL holding runs of every outcome: every job with its schedule, last outcome and
/// next run, the paused and the executing marks, the error text with markup shown as text; the token
/// is asked once, a wrong one changes nothing; with it, the actions need no token and the job is paused
/// in the database, its next run shown as "paused".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_the_jobs_and_pauses_one() -> anyhow::Result<()> {
    let db = seed::Database::create(&seed::server_url(), "browser").await?;
    let estate = seed::estate();
    let seeded = seed::seed(&db.pool, &estate, 200).await?;
    let admin = cron_runtime::store::postgres::PgStore::from_pool(db.pool.clone()).admin();
    let router = cronverb::dashboard::Dashboard::new(admin)
        .action_token(TOKEN)?
        .router();
    let base = serve(router).await?;
    let browser = Browser::start().await?;
    let client = &browser.client;

    // The overview: every module and job, with what each is doing.
    client.goto(&format!("{base}/")).await?;
    let body = client.find(Locator::Css("body")).await?.text().await?;
    for module in &estate {
        assert!(
            body.contains(&module.name),
            "module {} not shown",
            module.name
        );
        for job in &module.jobs {
            assert!(body.contains(&job.verb), "job {} not shown", job.verb);
            assert!(
                body.contains(&job.expression),
                "{}'s expression not shown",
                job.verb
            );
        }
    }
    assert!(body.contains(&seeded.active_key) && body.contains(&seeded.next_key));
    // The last run's outcome of every job, one of the outcomes.
    let outcomes = client.find_all(Locator::Css("tr.job .outcome")).await?;
    assert_eq!(outcomes.len(), 7, "one last outcome per job");
    for outcome in outcomes {
        let text = outcome.text().await?;
        assert!(
            OUTCOMES.contains(&text.as_str()),
            "unknown outcome `{text}`"
        );
    }
    // The paused mark with its note as written, and only on the paused job.
    let paused_rows = client.find_all(Locator::Css("tr.job.paused")).await?;
    assert_eq!(paused_rows.len(), 1);
    assert!(
        cell(&browser, &seeded.paused, ".paused-note")
            .await?
            .contains(seed::PAUSE_NOTE),
        "the pause note is not shown as written"
    );
    assert!(
        cell(&browser, &seeded.executing, ".executing")
            .await?
            .contains("executing on")
    );
    // The next run of a job in its zone, with the instant in the page's machine-readable form.
    let next = client
        .find(Locator::XPath(&format!(
            "//tr[contains(@class, 'job')][.//a[text()='{}']]//time",
            seeded.plain
        )))
        .await?;
    let shown: chrono::DateTime<chrono::FixedOffset> =
        chrono::DateTime::parse_from_rfc3339(&next.attr("datetime").await?.context("datetime")?)?;
    let stored: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT next_execution FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.key = $1 AND j.verb = $2",
    )
    .bind(&seeded.active_key)
    .bind(&seeded.plain)
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(shown, stored, "the next run shown is not the row's");
    // The error with markup, as text.
    assert_eq!(cell(&browser, &seeded.xss, ".error").await?, seed::XSS);
    no_injected_markup(&browser).await?;
    browser.screenshot("overview").await?;

    // A job's page, through its link: its runs, and the error as text again.
    client
        .find(Locator::LinkText(&seeded.xss))
        .await?
        .click()
        .await?;
    let runs = client.find_all(Locator::Css("tr.run")).await?;
    assert!(!runs.is_empty(), "the job's page lists no runs");
    let first_error = client.find(Locator::Css("tr.run pre.error")).await?;
    assert_eq!(first_error.text().await?, seed::XSS);
    no_injected_markup(&browser).await?;
    client.find(Locator::Css("svg.chart")).await?;
    browser.screenshot("job").await?;

    // The action token, entered once: the job's page asks for it instead of showing the actions.
    client.goto(&format!("{base}/")).await?;
    client
        .find(Locator::LinkText(&seeded.plain))
        .await?
        .click()
        .await?;
    let job_page = client.current_url().await?;
    let note = "investigating <b>duplicate</b> charges";
    assert!(
        client
            .find_all(Locator::Css("form[action$='/pause']"))
            .await?
            .is_empty(),
        "the actions are offered before the token was entered"
    );
    client
        .find(Locator::Css("form.sign-in input[name=token]"))
        .await?;
    browser.screenshot("token").await?;

    // A wrong token opens nothing, and says so.
    let form = client.form(Locator::Css("form.sign-in")).await?;
    form.set_by_name("token", "not-the-token").await?;
    form.submit().await?;
    client.wait().for_element(Locator::Css(".refusal")).await?;
    let refusal = client.find(Locator::Css(".refusal")).await?.text().await?;
    assert!(
        refusal.contains("the action token is wrong: nothing was changed"),
        "{refusal}"
    );
    browser.screenshot("refused").await?;

    // The right one, back on the job's page through the refusal's link: the actions, and no token field
    // in them.
    client.find(Locator::Css("a.back")).await?.click().await?;
    assert_eq!(client.current_url().await?, job_page);
    let form = client.form(Locator::Css("form.sign-in")).await?;
    form.set_by_name("token", TOKEN).await?;
    form.submit().await?;
    client
        .wait()
        .for_element(Locator::Css("form[action$='/pause']"))
        .await
        .context("the job's page offers no pause once the token was entered")?;
    assert_eq!(client.current_url().await?, job_page);
    assert!(
        client
            .find_all(Locator::Css("input[name=token]"))
            .await?
            .is_empty(),
        "an action's form still asks for the token"
    );
    // The session cookie is HttpOnly: the page's script cannot read it.
    let script_cookies = client.execute("return document.cookie", Vec::new()).await?;
    assert_eq!(script_cookies, serde_json::json!(""));

    let form = client.form(Locator::Css("form[action$='/pause']")).await?;
    form.set_by_name("note", note).await?;
    form.submit().await?;
    client
        .wait()
        .for_element(Locator::Css("form[action$='/resume']"))
        .await
        .context("the job's page offers no resume after the pause")?;
    let (rows, paused, stored_note) = paused_in_database(&db.pool, &seeded.plain).await?;
    assert!(
        rows > 0 && paused == rows,
        "paused in {paused} of its {rows} rows"
    );
    assert!(stored_note.unwrap_or_default().starts_with(note));
    let body = client.find(Locator::Css("body")).await?.text().await?;
    assert!(body.contains(note), "the note is not shown as written");
    // Paused: no next run, "paused" in its place.
    assert_eq!(
        cell(&browser, &seeded.plain, "td.next-run").await?,
        "paused\nno run until resumed"
    );
    no_injected_markup(&browser).await?;
    browser.screenshot("paused").await?;

    // The job's audit trail: the pause, by the holder of the action token, from the dashboard, its
    // note shown as written.
    let job_page = client.current_url().await?;
    client.find(Locator::Css("a.audit")).await?.click().await?;
    let audit_rows = client
        .find_all(Locator::Css("table.audit tbody tr"))
        .await?;
    let newest = audit_rows
        .first()
        .context("the job's audit trail lists no action")?
        .text()
        .await?;
    assert!(newest.contains("pause"), "{newest}");
    assert!(newest.contains("dashboard on "), "{newest}");
    let shown_note = client
        .find(Locator::Css("table.audit tbody tr td.note"))
        .await?
        .text()
        .await?;
    assert!(
        shown_note.starts_with(note),
        "the note is not shown as written: {shown_note}"
    );
    no_injected_markup(&browser).await?;
    browser.screenshot("audit").await?;
    client.goto(job_page.as_str()).await?;

    // The session holds for the other jobs' pages too: a trigger needs no token either.
    client.goto(&format!("{base}/")).await?;
    client
        .find(Locator::LinkText(&seeded.xss))
        .await?
        .click()
        .await?;
    client
        .find(Locator::Css("form[action$='/trigger'] button"))
        .await?
        .click()
        .await?;
    // The page before the form's answer has rows too, so its write is waited for in the database (a
    // full run once read it before the POST had reached the server).
    let mut triggered: Option<chrono::DateTime<chrono::Utc>> = None;
    for _ in 0..100 {
        triggered =
            sqlx::query_scalar("SELECT max(trigger_requested_at) FROM cron_jobs WHERE verb = $1")
                .bind(&seeded.xss)
                .fetch_one(&db.pool)
                .await?;
        if triggered.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        triggered.is_some(),
        "the trigger did not reach the database"
    );

    // A schedule override, its note hostile: the job's page and the overview show the drift from the
    // code's expression, the rows run the override; a reset returns to the code's.
    client.goto(job_page.as_str()).await?;
    let reschedule_note = "load test <script>alert(1)</script>";
    let form = client
        .form(Locator::Css("form[action$='/reschedule']"))
        .await?;
    form.set_by_name("expression", "*/30 * * * *").await?;
    form.set_by_name("note", reschedule_note).await?;
    form.submit().await?;
    client
        .wait()
        .for_element(Locator::Css("form[action$='/reschedule/reset']"))
        .await
        .context("the job's page offers no reset after the override")?;
    let schedules: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT schedule FROM cron_jobs j JOIN cron_deployments d ON d.id = j.deployment_id \
         WHERE d.active AND j.verb = $1",
    )
    .bind(&seeded.plain)
    .fetch_all(&db.pool)
    .await?;
    assert_eq!(
        schedules,
        ["*/30 * * * *"],
        "the override is not what the rows run"
    );
    let drift = client
        .find(Locator::Css(".override-note"))
        .await?
        .text()
        .await?;
    assert!(
        drift.contains(reschedule_note),
        "the override's note is not shown as written: {drift}"
    );
    no_injected_markup(&browser).await?;
    browser.screenshot("overridden").await?;
    client.goto(&format!("{base}/")).await?;
    assert!(
        cell(&browser, &seeded.plain, ".tag.overridden").await? == "overridden",
        "the overview does not mark the overridden job"
    );
    client.goto(job_page.as_str()).await?;
    client
        .find(Locator::Css("form[action$='/reschedule/reset'] button"))
        .await?
        .click()
        .await?;
    let mut code_schedule = false;
    for _ in 0..100 {
        let overrides: i64 =
            sqlx::query_scalar("SELECT count(*) FROM cron_overrides WHERE verb = $1")
                .bind(&seeded.plain)
                .fetch_one(&db.pool)
                .await?;
        if overrides == 0 {
            code_schedule = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(code_schedule, "the reset did not reach the database");
    client.goto(job_page.as_str()).await?;
    assert!(
        client
            .find_all(Locator::Css(".override-note"))
            .await?
            .is_empty(),
        "the drift is still shown after the reset"
    );

    // Cancelling the run in flight of the executing job, with a hostile note: the request is on the
    // run's row, by the holder of the token.
    client.goto(&format!("{base}/")).await?;
    client
        .find(Locator::LinkText(&seeded.executing))
        .await?
        .click()
        .await?;
    let cancel_note = "stuck <img src=x onerror=alert(1)>";
    let form = client.form(Locator::Css("form[action$='/cancel']")).await?;
    form.set_by_name("note", cancel_note).await?;
    form.submit().await?;
    let mut requested: Option<(String, Option<String>)> = None;
    for _ in 0..100 {
        requested = sqlx::query_as(
            "SELECT cancel_requested_by, cancel_note FROM cron_job_runs \
             WHERE verb = $1 AND cancel_requested_by IS NOT NULL",
        )
        .bind(&seeded.executing)
        .fetch_optional(&db.pool)
        .await?;
        if requested.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (by, stored_note) = requested.context("the cancel did not reach the database")?;
    assert_eq!(by, "the holder of the action token");
    assert_eq!(stored_note.as_deref(), Some(cancel_note));
    no_injected_markup(&browser).await?;

    // The audit page lists the three, newest first, the notes as written.
    client.goto(&format!("{base}/audit")).await?;
    let rows = client
        .find_all(Locator::Css("table.audit tbody tr"))
        .await?;
    let mut actions = Vec::new();
    for row in rows.iter().take(3) {
        actions.push(row.text().await?);
    }
    assert!(
        actions[0].contains("cancel") && actions[0].contains(cancel_note),
        "{actions:?}"
    );
    assert!(actions[1].contains("reset"), "{actions:?}");
    assert!(
        actions[2].contains("reschedule") && actions[2].contains(reschedule_note),
        "{actions:?}"
    );
    no_injected_markup(&browser).await?;
    browser.screenshot("audit-all").await?;

    // The deployment registered ahead: its schema and what it changes.
    client.goto(&format!("{base}/")).await?;
    client
        .find(Locator::LinkText(&seeded.next_key))
        .await?
        .click()
        .await?;
    let body = client.find(Locator::Css("body")).await?.text().await?;
    assert!(
        body.contains("reconcile_refunds"),
        "the added verb is not shown"
    );
    browser.screenshot("deployment").await?;

    browser.close().await
}

const OUTCOMES: &[&str] = &[
    "running",
    "succeeded",
    "failed",
    "panicked",
    "timed_out",
    "cancelled",
    "abandoned",
    "skipped",
];

/// The verbs of the job rows shown.
async fn shown_verbs(browser: &Browser) -> anyhow::Result<Vec<String>> {
    let mut verbs = Vec::new();
    for link in browser
        .client
        .find_all(Locator::Css("tr.job a.verb"))
        .await?
    {
        verbs.push(link.text().await?);
    }
    Ok(verbs)
}

/// What is wrong shows at a glance, in headless Chromium over the seeded estate: each module's runs of
/// the last 24 hours as the database counts them; relative times that the script keeps current; the
/// filters by verb and by state; and, once every replica has stopped and a job is overdue, the banners,
/// brought by the refresh, which replaces only what changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_wrong_shows_at_a_glance() -> anyhow::Result<()> {
    let db = seed::Database::create(&seed::server_url(), "glance").await?;
    let estate = seed::estate();
    let seeded = seed::seed(&db.pool, &estate, 200).await?;
    let admin = cron_runtime::store::postgres::PgStore::from_pool(db.pool.clone()).admin();
    let base = serve(cronverb::dashboard::Dashboard::new(admin).router()).await?;
    let browser = Browser::start().await?;
    let client = &browser.client;

    // All is well: no banner, and each module's runs of the last 24 hours by outcome.
    client.goto(&format!("{base}/")).await?;
    assert!(client.find_all(Locator::Css(".banner")).await?.is_empty());
    for module in &estate {
        let counted: Vec<(String, i64)> = sqlx::query_as(
            "SELECT outcome, count(*) FROM cron_job_runs \
             WHERE module_name = $1 AND scheduled_at >= now() - interval '24 hours' GROUP BY outcome",
        )
        .bind(&module.name)
        .fetch_all(&db.pool)
        .await?;
        anyhow::ensure!(!counted.is_empty(), "no runs of {} in 24 h", module.name);
        let shown = client
            .find_all(Locator::XPath(&format!(
                "//tr[contains(@class, 'module-summary')][.//a[text()='{}']]//span[@data-outcome]",
                module.name
            )))
            .await?;
        assert_eq!(shown.len(), counted.len(), "{}: {counted:?}", module.name);
        for (outcome, count) in counted {
            let span = client
                .find(Locator::XPath(&format!(
                    "//tr[contains(@class, 'module-summary')][.//a[text()='{}']]\
                     //span[@data-outcome='{outcome}']",
                    module.name
                )))
                .await
                .with_context(|| format!("{}: no count of {outcome}", module.name))?;
            let text = span.text().await?;
            assert!(
                text.starts_with(&format!("{count} ")),
                "{}: {outcome} shows `{text}`, the database counts {count}",
                module.name
            );
        }
    }

    // A relative time that the script keeps current: a replica's last heartbeat, seconds ago.
    let heartbeat = client.find(Locator::Css("tr.replica time.rel")).await?;
    let before = heartbeat.text().await?;
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let after = heartbeat.text().await?;
    for text in [&before, &after] {
        assert!(
            text == "now" || (text.ends_with(" s ago") || text.ends_with(" min ago")),
            "`{text}` is not a relative time"
        );
    }
    assert_ne!(before, after, "the relative time did not move");

    // The filters: a state chosen applies at once (the script submits it), the verb's text on Enter.
    let state = client.find(Locator::Css("form.filter select")).await?;
    state.select_by_value("paused").await?;
    client
        .wait()
        .for_element(Locator::Css("form.filter option[value='paused'][selected]"))
        .await?;
    assert_eq!(
        shown_verbs(&browser).await?,
        std::slice::from_ref(&seeded.paused)
    );
    browser.screenshot("filter").await?;
    client.goto(&format!("{base}/")).await?;
    let q = client
        .find(Locator::Css("form.filter input[name=q]"))
        .await?;
    q.send_keys("CHARGE\u{E007}").await?;
    client
        .wait()
        .for_element(Locator::Css("form.filter a.clear"))
        .await?;
    assert_eq!(shown_verbs(&browser).await?, ["billing::charge_cards"]);

    // Every replica stops (their heartbeats age) and a job's occurrence comes due unclaimed. The open
    // page's refresh brings the banners, replacing only the parts that changed: a row marked by the test
    // (a property of the element, not in its HTML) stays the same element.
    client.goto(&format!("{base}/")).await?;
    let untouched = "job:mail/mail::send_digest";
    client
        .execute(
            "document.querySelector(`tr[data-key='${arguments[0]}']`).cronverbMark = 'kept'",
            vec![serde_json::json!(untouched)],
        )
        .await?;
    sqlx::query("UPDATE cron_runners SET last_seen = now() - interval '10 minutes'")
        .execute(&db.pool)
        .await?;
    sqlx::query(
        "UPDATE cron_jobs SET next_execution = now() - interval '2 minutes' \
         WHERE verb = $1 AND deployment_id = (SELECT id FROM cron_deployments WHERE key = $2)",
    )
    .bind(&seeded.plain)
    .bind(&seeded.active_key)
    .execute(&db.pool)
    .await?;
    let banner = client
        .wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_element(Locator::Css(".banner-outage"))
        .await
        .context("no banner within 20 s of every replica stopping")?;
    assert_eq!(
        banner.text().await?,
        "Nothing runs in 2 modules: billing, mail: no replica of their active deployments is live, \
         so none of their jobs runs."
    );
    let overdue = client
        .find(Locator::Css(".banner-overdue"))
        .await?
        .text()
        .await?;
    assert!(
        overdue.starts_with(&format!("1 job is overdue: {} (by 2 min", seeded.plain)),
        "{overdue}"
    );
    let replaced = client
        .execute(
            "return document.documentElement.dataset.replaced",
            Vec::new(),
        )
        .await?;
    let replaced: i64 = replaced.as_str().context("no refresh")?.parse()?;
    assert!(
        replaced > 0,
        "the refresh replaced the whole page ({replaced})"
    );
    let mark = client
        .execute(
            "return document.querySelector(`tr[data-key='${arguments[0]}']`).cronverbMark || ''",
            vec![serde_json::json!(untouched)],
        )
        .await?;
    assert_eq!(
        mark,
        serde_json::json!("kept"),
        "an unchanged row was replaced"
    );
    assert!(
        cell(&browser, &seeded.plain, ".overdue-note")
            .await?
            .starts_with("overdue by")
    );
    browser.screenshot("banner").await?;

    // The overdue filter finds it.
    client.goto(&format!("{base}/?state=overdue")).await?;
    assert_eq!(
        shown_verbs(&browser).await?,
        std::slice::from_ref(&seeded.plain)
    );
    browser.close().await
}

/// A job on every replica (docs/runtime.md, "Jobs on every replica"), in headless Chromium: tagged
/// *every replica* on the overview and on its page, with each replica's last run as the replica
/// reported it in place of a last run of the history, and on its page a pause but no *Run now*.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_every_replica_shows_each_replicas_last_run() -> anyhow::Result<()> {
    use cron_runtime::store::{DeploymentSpec, JobSpec, Outcome, ReplicaRun, Store};
    use cron_schema::{Cron, RunOn, Schedule, Schema, Verb, ZonedSchedule};

    let db = seed::Database::create(&seed::server_url(), "everyreplica").await?;
    let store = cron_runtime::store::postgres::PgStore::from_pool(db.pool.clone());
    let job = |verb: &str, on: RunOn| JobSpec {
        verb: verb.to_owned(),
        expression: "*/15 * * * * *".to_owned(),
        zone: chrono_tz::Tz::UTC,
        schedule: ZonedSchedule::utc(Schedule::parse("*/15 * * * * *").unwrap()),
        timeout: std::time::Duration::from_secs(60),
        missed: Default::default(),
        retry: Default::default(),
        lease: None,
        on,
        catch_up: None,
        jitter: None,
        expect_within: None,
        fixed: false,
    };
    let refresh = "reports::refresh_cache";
    let jobs = vec![
        job("reports::send", RunOn::OneReplica),
        job(refresh, RunOn::EveryReplica),
    ];
    let schema = Schema::new(jobs.iter().map(|j| {
        let cron = Cron::new(j.expression.as_str()).on(j.on);
        ("reports", Verb::new(j.verb.as_str(), cron))
    }));
    let spec = DeploymentSpec {
        key: "reports@1".to_owned(),
        module: "reports".to_owned(),
        schema: serde_json::to_string(&schema)?,
        jobs,
    };
    // Two replicas, each reporting its last run of it (the second's failed).
    let now = chrono::Utc::now();
    let mut names = Vec::new();
    for (outcome, error) in [
        (Outcome::Succeeded, None),
        (Outcome::Failed, Some("the cache <server> is down")),
    ] {
        let runner = store.register(&spec).await?;
        let ran = [ReplicaRun {
            verb: refresh.to_owned(),
            scheduled_at: now,
            finished_at: now,
            outcome,
            error: error.map(str::to_owned),
        }];
        store.every_replica(&runner, Some(&ran)).await?;
        names.push(runner.name);
    }
    let admin = store.admin();
    let router = cronverb::dashboard::Dashboard::new(admin)
        .action_token(TOKEN)?
        .router();
    let base = serve(router).await?;
    let browser = Browser::start().await?;
    let client = &browser.client;

    client.goto(&format!("{base}/")).await?;
    let tags = client
        .find_all(Locator::Css("tr.job .every-replica"))
        .await?;
    assert_eq!(tags.len(), 1, "only the job on every replica is tagged");
    assert_eq!(tags[0].text().await?, "every replica");
    let row = cell(&browser, refresh, "td:nth-child(4)").await?;
    for name in &names {
        assert!(row.contains(name), "{name}'s last run is not shown: {row}");
    }
    assert!(row.contains("succeeded") && row.contains("failed"), "{row}");
    assert!(row.contains("the cache <server> is down"), "{row}");
    // A job on every replica has no missed-run policy (each replica runs its own occurrences).
    let schedule = cell(&browser, refresh, "td:nth-child(2)").await?;
    assert!(!schedule.contains("missed"), "{schedule}");
    assert!(
        cell(&browser, "reports::send", "td:nth-child(2)")
            .await?
            .contains("missed: once")
    );
    assert!(
        cell(&browser, "reports::send", "td:nth-child(4)")
            .await?
            .contains("never ran"),
        "the job on one replica shows its own history"
    );
    browser.screenshot("every-replica").await?;
    // A replica's failed run makes it failing: the filter by state shows it alone.
    client.goto(&format!("{base}/?state=failing")).await?;
    assert_eq!(shown_verbs(&browser).await?, [refresh]);
    client.goto(&format!("{base}/")).await?;

    // Its page: tagged, and once the token is entered, a pause but no "Run now".
    client
        .find(Locator::LinkText(refresh))
        .await?
        .click()
        .await?;
    client
        .find(Locator::Css("tr.job .every-replica"))
        .await
        .context("the job's page does not tag it")?;
    let form = client.form(Locator::Css("form.sign-in")).await?;
    form.set_by_name("token", TOKEN).await?;
    form.submit().await?;
    client
        .wait()
        .for_element(Locator::Css("form[action$='/pause']"))
        .await
        .context("the job's page offers no pause")?;
    assert!(
        client
            .find_all(Locator::Css("form[action$='/trigger']"))
            .await?
            .is_empty(),
        "a job on every replica cannot be triggered"
    );
    browser.close().await
}
