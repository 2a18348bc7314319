//! The pages: the overview, a job's page, a deployment's page, the refusals, and the static files.

use askama::Template;
use axum::extract::{OriginalUri, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use chrono::{DateTime, Utc};

use crate::admin::{
    AUDIT_LIMIT, AdminError, AuditEntry, AuditFilter, JobStatus, ModuleStatus, Run, RunFilter,
    Status,
};

use super::chart::{self, Chart};
use super::{Shared, State, csrf, format, session};

/// How many runs a job's page lists.
pub(super) const PAGE_RUNS: u32 = 50;

/// What every page knows of its request: where the dashboard is, whether this visitor may act, and the
/// CSRF cookie (a new one is set with the response).
pub(super) struct Visit {
    pub(super) base: String,
    may_act: bool,
    /// The dashboard has an action token.
    token: bool,
    /// The request carries a valid session cookie (the token was entered in this browser session).
    pub(super) session: bool,
    /// The request came over TLS: the cookies set are `Secure`.
    secure: bool,
    nonce: Option<String>,
    new_nonce: bool,
}

impl Visit {
    pub(super) fn new(shared: &Shared, parts: &Parts) -> Visit {
        let base = match parts.extensions.get::<OriginalUri>() {
            Some(original) => format::base(original, &parts.uri),
            None => String::new(),
        };
        let may_act = shared.may_act(parts);
        let (nonce, new_nonce) = match (may_act, csrf::cookie(&parts.headers)) {
            (false, _) => (None, false),
            (true, Some(nonce)) => (Some(nonce), false),
            (true, None) => (Some(shared.csrf.nonce()), true),
        };
        let token = shared.token.is_some();
        Visit {
            base,
            may_act,
            token,
            session: token && session::valid(&shared.csrf, &parts.headers, Utc::now().timestamp()),
            secure: session::over_tls(&parts.uri, &parts.headers),
            nonce,
            new_nonce,
        }
    }

    /// The forms of a job's page, when this visitor may act: the action token's form until it was
    /// entered in this browser session (when the dashboard has one), the actions then.
    fn actions(&self, shared: &Shared, href: &str, job: &JobStatus) -> Option<Actions> {
        let nonce = self.nonce.as_ref().filter(|_| self.may_act)?;
        Some(Actions {
            href: href.to_owned(),
            session_href: format!("{}/session", self.base),
            csrf: shared.csrf.token(nonce),
            sign_in: self.token && !self.session,
            session: self.session,
            paused: job.paused,
            every_replica: job.every_replica,
            backfilling: job.backfill.is_some(),
            running: job.running.is_some(),
            overridden: job.schedule_override.is_some(),
            fixed: job.fixed,
        })
    }

    /// A `Set-Cookie` value for the dashboard's path: `HttpOnly`, `SameSite=Strict`, and `Secure` when
    /// the request came over TLS.
    pub(super) fn cookie(
        &self,
        name: &str,
        value: &str,
        max_age: Option<u64>,
    ) -> Option<HeaderValue> {
        let path = if self.base.is_empty() {
            "/"
        } else {
            &self.base
        };
        let mut cookie = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict");
        if let Some(max_age) = max_age {
            cookie.push_str(&format!("; Max-Age={max_age}"));
        }
        if self.secure {
            cookie.push_str("; Secure");
        }
        HeaderValue::from_str(&cookie).ok()
    }

    /// `html` with `status`, and the CSRF cookie when this visit made one.
    pub(super) fn respond(&self, status: StatusCode, html: String) -> Response {
        let mut response = (status, Html(html)).into_response();
        self.set_csrf_cookie(&mut response);
        response
    }

    /// Adds the CSRF cookie to `response` when this visit made one.
    pub(super) fn set_csrf_cookie(&self, response: &mut Response) {
        if let (true, Some(nonce)) = (self.new_nonce, &self.nonce)
            && let Some(value) = self.cookie(csrf::COOKIE, nonce, None)
        {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }

    /// A page saying why a request was refused or failed; nothing was changed.
    pub(super) fn refuse(&self, status: StatusCode, message: impl Into<String>) -> Response {
        self.refuse_from(status, message, None)
    }

    /// [`refuse`](Visit::refuse), with a link back to `back`: the page whose form was refused.
    pub(super) fn refuse_from(
        &self,
        status: StatusCode,
        message: impl Into<String>,
        back: Option<String>,
    ) -> Response {
        self.refuse_showing(status, message, back, None)
    }

    /// [`refuse_from`](Visit::refuse_from), with `detail` shown as preformatted text under the
    /// message: an expression's diagnostic, its caret under what is wrong, as `cronverb check`
    /// prints it.
    pub(super) fn refuse_showing(
        &self,
        status: StatusCode,
        message: impl Into<String>,
        back: Option<String>,
        detail: Option<String>,
    ) -> Response {
        let page = Refused {
            base: self.base.clone(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            message: message.into(),
            back,
            detail,
        };
        self.render(status, &page)
    }

    /// The page of an operator-API failure: 404 for what does not exist, 409 for a refusal in the
    /// current state, 500 for the database (its message names no URL or password: docs/dashboard.md).
    pub(super) fn failure(&self, error: &AdminError) -> Response {
        let status = match error {
            AdminError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            AdminError::Executing { .. }
            | AdminError::NoActiveDeployment { .. }
            | AdminError::NotInActiveDeployment { .. } => StatusCode::CONFLICT,
            AdminError::RescheduleRefused(_) => StatusCode::BAD_REQUEST,
            _ if error.is_invalid_input() => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            // The error may name what the request's path named: escaped, as every request-derived value.
            tracing::warn!(
                target: "cronverb::dashboard",
                error = %super::escape::Escaped(&error.to_string()),
                "dashboard page failed"
            );
        }
        self.refuse(status, error.to_string())
    }

    pub(super) fn render(&self, status: StatusCode, page: &impl Template) -> Response {
        match page.render() {
            Ok(html) => self.respond(status, html),
            Err(error) => {
                tracing::error!(target: "cronverb::dashboard", %error, "rendering a dashboard page failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the page could not be rendered",
                )
                    .into_response()
            }
        }
    }
}

/// The forms of a job's page.
pub(super) struct Actions {
    /// The job's page: the forms post to `{href}/pause` and so on.
    href: String,
    /// `/session`, under the dashboard's base.
    session_href: String,
    csrf: String,
    /// The action token was not entered in this browser session: its form instead of the actions.
    sign_in: bool,
    /// It was: the actions, and a form that ends the session.
    session: bool,
    paused: bool,
    /// A job on every replica cannot be triggered: no "Run now", no backfill.
    every_replica: bool,
    /// A backfill is queued: a form cancels it.
    backfilling: bool,
    /// A run is in flight: a form cancels it (docs/operations.md, "Cancelling a run").
    running: bool,
    /// An override runs instead of the code's schedule: a form resets it.
    overridden: bool,
    /// Its code declares it `fixed`: no reschedule form (docs/operations.md, "Changing a schedule
    /// without a build").
    fixed: bool,
}

#[derive(Template)]
#[template(path = "refused.html")]
struct Refused {
    base: String,
    title: String,
    status: u16,
    message: String,
    /// The page whose form was refused.
    back: Option<String>,
    /// Preformatted text under the message: an expression's diagnostic with its caret.
    detail: Option<String>,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    base: String,
    title: String,
    now: String,
    now_machine: String,
    banners: Vec<Banner>,
    summaries: Vec<ModuleSummary>,
    filter: FilterView,
    /// Which jobs of how many this page shows.
    shown: String,
    /// The modules with a job on this page.
    modules: Vec<ModuleView>,
    previous: Option<String>,
    next: Option<String>,
}

struct ModuleView {
    name: String,
    anchor: String,
    active: Option<String>,
    deployments: Vec<DeploymentView>,
    jobs: Vec<JobView>,
}

/// What is wrong, at the top of the overview and of a job's page: `kind` is `outage` (a module with no
/// live replica: nothing of it runs) or `overdue`.
pub(super) struct Banner {
    kind: &'static str,
    headline: String,
    detail: String,
}

/// A module in the overview's first table: its replicas, jobs and the runs of the last 24 hours.
struct ModuleSummary {
    name: String,
    anchor: String,
    live_replicas: i64,
    nothing_runs: bool,
    jobs: usize,
    failing: usize,
    overdue: usize,
    paused: usize,
    /// `None` when the history could not be read.
    counts: Option<super::counts::Counts>,
}

/// The filter form, as the request set it.
struct FilterView {
    q: String,
    options: Vec<StateOption>,
    active: bool,
}

struct StateOption {
    value: &'static str,
    label: &'static str,
    selected: bool,
}

struct DeploymentView {
    key: String,
    href: String,
    active: bool,
    live_replicas: i64,
    created: String,
    activated: String,
    replicas: Vec<ReplicaView>,
}

/// A job as the overview and its page show it.
struct JobView {
    verb: String,
    /// `module/verb`: the row's `data-key`, which the refresh matches rows by.
    key: String,
    href: String,
    deployment: String,
    expression: String,
    reading: String,
    zone: String,
    next_local: String,
    next_utc: String,
    next_machine: String,
    next_relative: String,
    missed: String,
    /// How old a late occurrence may be and still run (`catch_up`, docs/runtime.md, "Missed runs"); `None`
    /// when nothing bounds it.
    catch_up: Option<String>,
    /// Its last run failed, panicked, timed out or was abandoned.
    failing: bool,
    /// `outcome-…` of the last run, with its outcome, duration and lateness.
    last: Option<LastView>,
    /// Every replica runs it itself (docs/runtime.md, "Jobs on every replica").
    every_replica: bool,
    /// For a job on every replica, the last run of each live replica that reported one.
    replica_runs: Vec<ReplicaRunView>,
    paused: Option<PausedView>,
    executing: Option<ExecutingView>,
    triggered: Option<String>,
    /// A backfill in progress: how many occurrences are queued, from which.
    backfill: Option<String>,
    broken: Option<String>,
    overdue: Option<String>,
    /// Its jitter and offset (docs/runtime.md, "Jitter"), in words, with its next start.
    jitter: Option<String>,
    /// The drift of a schedule override (docs/operations.md, "Changing a schedule without a build"):
    /// the code's schedule, who set the override, when and why.
    overridden: Option<String>,
}

/// When a run of `scheduled_at` was due to start: a regular occurrence of a job with a jitter offset
/// of `offset_ms` at its instant plus that offset, a manual run (a trigger, a backfill) and a job
/// without jitter at its instant. Lateness counts from it (docs/runtime.md, "Jitter").
fn due_start(scheduled_at: DateTime<Utc>, manual: bool, offset_ms: Option<u64>) -> DateTime<Utc> {
    match offset_ms {
        Some(ms) if !manual => scheduled_at + chrono::TimeDelta::milliseconds(ms as i64),
        _ => scheduled_at,
    }
}

struct LastView {
    outcome: String,
    class: String,
    scheduled: String,
    scheduled_machine: String,
    scheduled_relative: String,
    duration: String,
    lateness: String,
    manual: bool,
    error: Option<String>,
}

struct ReplicaRunView {
    replica: String,
    deployment: String,
    outcome: String,
    class: String,
    scheduled: String,
    scheduled_machine: String,
    scheduled_relative: String,
    finished: String,
    error: Option<String>,
}

struct PausedView {
    note: String,
    since: String,
    since_machine: String,
    since_relative: String,
}

struct ExecutingView {
    replica: String,
    since: String,
    since_machine: String,
    since_relative: String,
    lease_end: String,
}

/// The outcomes that make a job `failing` in the overview's filter (docs/dashboard.md).
pub(super) const FAILING: &[&str] = &["failed", "panicked", "timed_out", "abandoned"];

impl JobView {
    fn new(base: &str, module: &str, job: &JobStatus, now: DateTime<Utc>) -> JobView {
        let reading = match cron_schema::Schedule::parse(&job.expression) {
            Ok(schedule) => schedule.describe(),
            Err(_) => "does not parse".to_owned(),
        };
        JobView {
            verb: job.verb.clone(),
            key: format!("{module}/{}", job.verb),
            href: format::job_href(base, module, &job.verb),
            deployment: job.deployment.clone(),
            expression: job.expression.clone(),
            reading,
            zone: job.timezone.clone(),
            next_local: format::zoned(job.next_execution, &job.timezone),
            next_utc: format::utc(job.next_execution),
            next_machine: format::machine(job.next_execution),
            next_relative: format::relative_to(job.next_execution, now),
            missed: job.missed.clone(),
            catch_up: job
                .catch_up_secs
                .map(|secs| cron_schema::format_duration(std::time::Duration::from_secs(secs))),
            failing: is_failing(job),
            last: job.last_run.as_ref().map(|run| LastView {
                outcome: run.outcome.clone(),
                class: format!("outcome-{}", run.outcome),
                scheduled: format::utc(Some(run.scheduled_at)),
                scheduled_machine: format::machine(Some(run.scheduled_at)),
                scheduled_relative: format::relative_to(Some(run.scheduled_at), now),
                duration: format::span(run.started_at, run.finished_at),
                lateness: format::span(
                    Some(due_start(
                        run.scheduled_at,
                        run.manual,
                        job.jitter_offset_ms,
                    )),
                    run.started_at,
                ),
                manual: run.manual,
                error: run.error.clone(),
            }),
            every_replica: job.every_replica,
            replica_runs: job
                .replica_runs
                .iter()
                .map(|run| ReplicaRunView {
                    replica: run.replica.clone(),
                    deployment: run.deployment.clone(),
                    outcome: run.outcome.clone(),
                    class: format!("outcome-{}", run.outcome),
                    scheduled: format::utc(Some(run.scheduled_at)),
                    scheduled_machine: format::machine(Some(run.scheduled_at)),
                    scheduled_relative: format::relative_to(Some(run.scheduled_at), now),
                    finished: format::utc(Some(run.finished_at)),
                    error: run.error.clone(),
                })
                .collect(),
            paused: job.paused.then(|| PausedView {
                note: job.pause_note.clone().unwrap_or_default(),
                since: format::utc(job.paused_at),
                since_machine: format::machine(job.paused_at),
                since_relative: format::relative_to(job.paused_at, now),
            }),
            executing: (job.state == "executing").then(|| match &job.running {
                Some(running) => ExecutingView {
                    replica: running.runner.clone(),
                    since: format::utc(running.started_at),
                    since_machine: format::machine(running.started_at),
                    since_relative: format::relative_to(running.started_at, now),
                    lease_end: format::utc(running.lease_expires_at),
                },
                None => ExecutingView {
                    replica: "—".to_owned(),
                    since: "—".to_owned(),
                    since_machine: String::new(),
                    since_relative: String::new(),
                    lease_end: "—".to_owned(),
                },
            }),
            triggered: job.trigger_requested_at.map(|at| format::utc(Some(at))),
            backfill: job.backfill.as_ref().map(|backfill| {
                format!(
                    "{} occurrence(s) queued, the next {}",
                    backfill.queued,
                    format::utc(Some(backfill.next))
                )
            }),
            broken: job.broken.clone(),
            overdue: job
                .overdue_secs
                .map(|secs| format::millis(secs.saturating_mul(1000) as i64)),
            jitter: match (&job.jitter, job.jitter_offset_ms) {
                (Some(jitter), Some(offset)) => Some(format!(
                    "jitter {jitter}: each occurrence starts {} after its instant{}",
                    format::millis(i64::try_from(offset).unwrap_or(i64::MAX)),
                    match job.next_start {
                        Some(start) => format!(", the next at {}", format::utc(Some(start))),
                        None => String::new(),
                    }
                )),
                _ => None,
            },
            overridden: job.schedule_override.as_ref().map(|over| {
                let by = match &over.by {
                    Some(by) => format!(" by {by} at {}", format::utc(over.at)),
                    None => String::new(),
                };
                let note = match &over.note {
                    Some(note) => format!(": {note}"),
                    None => String::new(),
                };
                format!(
                    "the code says {} in {}; this override was set{by}{note}",
                    over.code_expression, over.code_timezone
                )
            }),
        }
    }
}

/// Whether `job`'s last run failed, panicked, timed out or was abandoned; for a job on every replica,
/// the last run of any live replica.
fn is_failing(job: &JobStatus) -> bool {
    job.last_run
        .as_ref()
        .is_some_and(|run| FAILING.contains(&run.outcome.as_str()))
        || job
            .replica_runs
            .iter()
            .any(|run| FAILING.contains(&run.outcome.as_str()))
}

/// Whether nothing of `module` runs: its active deployment (or, with none active, every deployment)
/// has no live replica.
fn nothing_runs(module: &ModuleStatus) -> bool {
    module
        .deployments
        .iter()
        .filter(|d| d.active || module.active_deployment.is_none())
        .all(|d| d.live_replicas == 0)
}

/// The live replicas of `module`'s active deployment (of every deployment when none is active).
fn live_replicas(module: &ModuleStatus) -> i64 {
    module
        .deployments
        .iter()
        .filter(|d| d.active || module.active_deployment.is_none())
        .map(|d| d.live_replicas)
        .sum()
}

/// How many names a banner lists before "and N more".
const BANNER_NAMES: usize = 8;

/// The banners of what is wrong in `modules`: one for the modules where nothing runs, one for the
/// overdue jobs; none when all is well.
pub(super) fn banners<'a>(modules: impl IntoIterator<Item = &'a ModuleStatus>) -> Vec<Banner> {
    let mut down = Vec::new();
    let mut overdue = Vec::new();
    for module in modules {
        if nothing_runs(module) {
            down.push(module.name.as_str());
        }
        for job in &module.jobs {
            if let Some(secs) = job.overdue_secs {
                overdue.push(format!(
                    "{} (by {})",
                    job.verb,
                    format::millis(secs.saturating_mul(1000) as i64)
                ));
            }
        }
    }
    let mut banners = Vec::new();
    if !down.is_empty() {
        let (headline, detail) = match down.as_slice() {
            [one] => (
                format!("Nothing runs in module {one}:"),
                "no replica of its active deployment is live, so none of its jobs runs.".to_owned(),
            ),
            many => (
                format!("Nothing runs in {} modules:", many.len()),
                format!(
                    "{}: no replica of their active deployments is live, so none of their jobs runs.",
                    listed(many.iter().map(|name| (*name).to_owned()))
                ),
            ),
        };
        banners.push(Banner {
            kind: "outage",
            headline,
            detail,
        });
    }
    if !overdue.is_empty() {
        let (headline, claimed) = match overdue.len() {
            1 => ("1 job is overdue:".to_owned(), "its due occurrence"),
            n => (format!("{n} jobs are overdue:"), "their due occurrences"),
        };
        banners.push(Banner {
            kind: "overdue",
            headline,
            detail: format!(
                "{}: no replica claimed {claimed}.",
                listed(overdue.into_iter())
            ),
        });
    }
    banners
}

/// The first [`BANNER_NAMES`] of `names`, and how many more there are.
fn listed(names: impl ExactSizeIterator<Item = String>) -> String {
    let total = names.len();
    let mut text = names.take(BANNER_NAMES).collect::<Vec<_>>().join(", ");
    if total > BANNER_NAMES {
        text.push_str(&format!(" and {} more", total - BANNER_NAMES));
    }
    text
}

fn module_view(
    base: &str,
    module: &ModuleStatus,
    jobs: Vec<JobView>,
    now: DateTime<Utc>,
) -> ModuleView {
    ModuleView {
        name: module.name.clone(),
        anchor: anchor(&module.name),
        active: module.active_deployment.clone(),
        deployments: module
            .deployments
            .iter()
            .map(|d| DeploymentView {
                key: d.key.clone(),
                href: format::deployment_href(base, &d.key),
                active: d.active,
                live_replicas: d.live_replicas,
                created: format::utc(Some(d.created_at)),
                activated: format::utc(d.activated_at),
                replicas: d
                    .replicas
                    .iter()
                    .map(|r| ReplicaView::new(r, now))
                    .collect(),
            })
            .collect(),
        jobs,
    }
}

/// The `id` of a module's section: `module-` and its name as a path segment.
fn anchor(module: &str) -> String {
    format!("module-{}", format::segment(module))
}

/// How many jobs a page of the overview shows.
pub(super) const PAGE_JOBS: usize = 100;

/// The query of the overview: the filter and the page (docs/dashboard.md, "Routes").
#[derive(Debug, Default, Deserialize)]
pub(super) struct OverviewQuery {
    /// Part of a verb's full name, any case.
    #[serde(default)]
    q: String,
    /// `failing`, `overdue` or `paused`; empty for every job.
    #[serde(default)]
    state: String,
    /// The page, from 1.
    page: Option<usize>,
}

/// The states the overview filters by: the query's value, and the form's label.
const STATES: &[(&str, &str)] = &[
    ("", "any"),
    ("failing", "failing"),
    ("overdue", "overdue"),
    ("paused", "paused"),
];

impl OverviewQuery {
    /// Whether `job` passes the filter.
    fn keeps(&self, job: &JobStatus) -> bool {
        let q = self.q.trim().to_lowercase();
        let state = match self.state.as_str() {
            "failing" => is_failing(job),
            "overdue" => job.overdue_secs.is_some(),
            "paused" => job.paused,
            _ => true,
        };
        state && (q.is_empty() || job.verb.to_lowercase().contains(&q))
    }

    /// The overview's link with this filter, at `page`.
    fn href(&self, base: &str, page: usize) -> String {
        let mut query = Vec::new();
        if !self.q.trim().is_empty() {
            query.push(format!("q={}", format::segment(self.q.trim())));
        }
        if !self.state.is_empty() {
            query.push(format!("state={}", format::segment(&self.state)));
        }
        if page > 1 {
            query.push(format!("page={page}"));
        }
        if query.is_empty() {
            format!("{base}/")
        } else {
            format!("{base}/?{}", query.join("&"))
        }
    }
}

/// `GET /?q=TEXT&state=STATE&page=N`: the banners of what is wrong, every module with its counts of the
/// last 24 hours, then a page of the jobs that pass the filter, under their modules.
pub(super) async fn overview(axum::extract::State(shared): State, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let query = match Query::<OverviewQuery>::try_from_uri(&parts.uri) {
        Ok(Query(query)) => query,
        Err(_) => return visit.refuse(StatusCode::BAD_REQUEST, "the query is malformed"),
    };
    if !STATES.iter().any(|(value, _)| *value == query.state) {
        return visit.refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown state `{}`; expected one of: `failing`, `overdue`, `paused`",
                query.state
            ),
        );
    }
    let status = match shared.admin.status(None).await {
        Ok(status) => status,
        Err(error) => return visit.failure(&error),
    };
    let mut summaries = Vec::with_capacity(status.modules.len());
    for module in &status.modules {
        summaries.push(ModuleSummary {
            name: module.name.clone(),
            anchor: anchor(&module.name),
            live_replicas: live_replicas(module),
            nothing_runs: nothing_runs(module),
            jobs: module.jobs.len(),
            failing: module.jobs.iter().filter(|j| is_failing(j)).count(),
            overdue: module
                .jobs
                .iter()
                .filter(|j| j.overdue_secs.is_some())
                .count(),
            paused: module.jobs.iter().filter(|j| j.paused).count(),
            counts: shared.counts.of(&shared.admin, &module.name).await,
        });
    }
    let page = overview_page(&visit.base, &status, &query, summaries);
    visit.render(StatusCode::OK, &page)
}

/// The overview of `status` for `query`: the page of the jobs that pass its filter.
fn overview_page(
    base: &str,
    status: &Status,
    query: &OverviewQuery,
    summaries: Vec<ModuleSummary>,
) -> Overview {
    let now = status.now;
    let kept: Vec<(&ModuleStatus, &JobStatus)> = status
        .modules
        .iter()
        .flat_map(|m| m.jobs.iter().map(move |j| (m, j)))
        .filter(|(_, job)| query.keeps(job))
        .collect();
    let pages = kept.len().div_ceil(PAGE_JOBS).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let first = (page - 1) * PAGE_JOBS;
    let shown_jobs = &kept[first.min(kept.len())..(first + PAGE_JOBS).min(kept.len())];
    let filtering = !query.q.trim().is_empty() || !query.state.is_empty();
    let mut modules: Vec<ModuleView> = Vec::new();
    for module in &status.modules {
        let jobs: Vec<JobView> = shown_jobs
            .iter()
            .filter(|(m, _)| m.name == module.name)
            .map(|(_, job)| JobView::new(base, &module.name, job, now))
            .collect();
        // A module without jobs shows on the first page when nothing is filtered.
        if !jobs.is_empty() || (!filtering && page == 1 && module.jobs.is_empty()) {
            modules.push(module_view(base, module, jobs, now));
        }
    }
    let total: usize = status.modules.iter().map(|m| m.jobs.len()).sum();
    let shown = match (kept.len(), filtering) {
        (0, true) => format!("No job of the {total} matches the filter."),
        (0, false) => "No jobs.".to_owned(),
        (n, _) if n <= PAGE_JOBS => {
            if filtering {
                format!("{n} of {total} jobs match the filter.")
            } else {
                format!("{n} jobs.")
            }
        }
        (n, _) => format!(
            "Jobs {}–{} of {n}{}, page {page} of {pages}.",
            first + 1,
            first + shown_jobs.len(),
            if filtering {
                format!(" matching the filter (of {total})")
            } else {
                String::new()
            }
        ),
    };
    Overview {
        title: "cronverb".to_owned(),
        now: format::utc(Some(now)),
        now_machine: format::machine(Some(now)),
        banners: banners(&status.modules),
        summaries,
        filter: FilterView {
            q: query.q.clone(),
            options: STATES
                .iter()
                .map(|&(value, label)| StateOption {
                    value,
                    label,
                    selected: value == query.state,
                })
                .collect(),
            active: filtering,
        },
        shown,
        modules,
        previous: (page > 1).then(|| query.href(base, page - 1)),
        next: (page < pages).then(|| query.href(base, page + 1)),
        base: base.to_owned(),
    }
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    base: String,
    title: String,
    module: String,
    now_machine: String,
    banners: Vec<Banner>,
    job: Option<JobView>,
    runs: Vec<RunView>,
    chart: Chart,
    chart_width: u32,
    chart_height: u32,
    /// The next page of older runs.
    older: Option<String>,
    /// The audit trail of this verb.
    audit_href: String,
    /// The first page, when this is not it.
    newest: Option<String>,
    actions: Option<Actions>,
}

struct RunView {
    id: i64,
    outcome: String,
    class: String,
    manual: bool,
    /// A backfill's run (`cronverb backfill`): tagged so, not `manual`.
    backfill: bool,
    late: bool,
    scheduled: String,
    scheduled_machine: String,
    scheduled_relative: String,
    started: String,
    finished: String,
    duration: String,
    lateness: String,
    skipped: i32,
    runner: String,
    deployment: String,
    error: Option<String>,
    /// Each attempt of an occurrence tried more than once; empty otherwise.
    attempts: Vec<AttemptView>,
    /// When the pending retry of a `retrying` run is due.
    retry_at: Option<String>,
}

/// One attempt of a run tried more than once.
struct AttemptView {
    number: usize,
    outcome: &'static str,
    class: String,
    started: String,
    duration: String,
    error: Option<String>,
}

impl RunView {
    /// A run of a job whose jitter offset is `offset_ms` (none without a jitter).
    fn new(run: &Run, now: DateTime<Utc>, offset_ms: Option<u64>) -> RunView {
        RunView {
            id: run.id,
            outcome: run.outcome.clone(),
            class: format!("outcome-{}", run.outcome),
            manual: run.manual && !run.backfill,
            backfill: run.backfill,
            late: run.late,
            scheduled: format::utc(Some(run.scheduled_at)),
            scheduled_machine: format::machine(Some(run.scheduled_at)),
            scheduled_relative: format::relative_to(Some(run.scheduled_at), now),
            started: format::utc(run.started_at),
            finished: format::utc(run.finished_at),
            duration: format::span(run.started_at, run.finished_at),
            lateness: format::span(
                Some(due_start(run.scheduled_at, run.manual, offset_ms)),
                run.started_at,
            ),
            skipped: run.skipped,
            runner: run.runner.clone(),
            deployment: run.deployment.clone().unwrap_or_else(|| "—".to_owned()),
            error: run.error.clone(),
            attempts: run
                .attempts
                .iter()
                .enumerate()
                .map(|(i, attempt)| AttemptView {
                    number: i + 1,
                    outcome: attempt.outcome.as_str(),
                    class: format!("outcome-{}", attempt.outcome.as_str()),
                    started: format::utc(attempt.started_at),
                    duration: format::span(attempt.started_at, Some(attempt.finished_at)),
                    error: attempt.error.clone(),
                })
                .collect(),
            retry_at: run.retry_at.map(|at| format::utc(Some(at))),
        }
    }
}

/// The query of a job's page.
#[derive(Debug, Deserialize)]
pub(super) struct JobQuery {
    /// The page of runs older than this cursor (`RunCursor`'s text: docs/dashboard.md, "Routes").
    before: Option<String>,
}

/// `GET /jobs/{module}/{verb}?before=CURSOR`: a job and a page of its history, newest first.
pub(super) async fn job(
    axum::extract::State(shared): State,
    Path((module, verb)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let before = match Query::<JobQuery>::try_from_uri(&parts.uri) {
        Ok(Query(query)) => match query.before.as_deref().map(str::parse).transpose() {
            Ok(before) => before,
            Err(_) => {
                return visit.refuse(StatusCode::BAD_REQUEST, "the `before` cursor is malformed");
            }
        },
        Err(_) => return visit.refuse(StatusCode::BAD_REQUEST, "the query is malformed"),
    };
    let status = match shared.admin.status(Some(&module)).await {
        Ok(status) => status,
        Err(error) => return visit.failure(&error),
    };
    let job = status
        .modules
        .iter()
        .flat_map(|m| &m.jobs)
        .find(|job| job.verb == verb);
    let filter = RunFilter {
        module: Some(module.clone()),
        verb: Some(verb.clone()),
        since: None,
        before,
        // One more than shown, to know whether there is an older page.
        limit: PAGE_RUNS + 1,
    };
    let mut runs = match shared.admin.runs(&filter).await {
        Ok(runs) => runs,
        Err(error) => return visit.failure(&error),
    };
    let href = format::job_href(&visit.base, &module, &verb);
    let older = if runs.len() > PAGE_RUNS as usize {
        runs.truncate(PAGE_RUNS as usize);
        runs.last().map(|run| {
            let cursor = crate::admin::RunCursor::of(run);
            format!("{href}?before={cursor}")
        })
    } else {
        None
    };
    let now = status.now;
    let page = JobPage {
        audit_href: format!("{}/audit?verb={}", visit.base, format::segment(&verb)),
        title: verb.clone(),
        module: module.clone(),
        now_machine: format::machine(Some(now)),
        banners: banners(&status.modules),
        job: job.map(|job| JobView::new(&visit.base, &module, job, now)),
        chart: chart::chart(&runs),
        chart_width: chart::WIDTH,
        chart_height: chart::HEIGHT,
        runs: runs
            .iter()
            .map(|run| RunView::new(run, now, job.and_then(|job| job.jitter_offset_ms)))
            .collect(),
        older,
        newest: before.map(|_| href.clone()),
        actions: job.and_then(|job| visit.actions(&shared, &href, job)),
        base: visit.base.clone(),
    };
    visit.render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "deployment.html")]
struct DeploymentPage {
    base: String,
    title: String,
    key: String,
    module: String,
    active: bool,
    active_key: Option<String>,
    created: String,
    activated: String,
    replicas: Vec<ReplicaView>,
    schema: String,
    /// The difference from the active deployment's schema, one line per change; `None` for the active
    /// one itself or when none is active.
    diff: Option<Vec<DiffLine>>,
}

struct ReplicaView {
    name: String,
    started: String,
    last_seen: String,
    last_seen_machine: String,
    last_seen_relative: String,
    live: bool,
}

impl ReplicaView {
    fn new(replica: &crate::admin::Replica, now: DateTime<Utc>) -> ReplicaView {
        ReplicaView {
            name: replica.name.clone(),
            started: format::utc(Some(replica.started_at)),
            last_seen: format::utc(Some(replica.last_seen)),
            last_seen_machine: format::machine(Some(replica.last_seen)),
            last_seen_relative: format::relative_to(Some(replica.last_seen), now),
            live: replica.live,
        }
    }
}

struct DiffLine {
    class: &'static str,
    text: String,
}

/// `GET /deployments/{key}`: a deployment's schema, replicas, and its difference from the active one.
pub(super) async fn deployment(
    axum::extract::State(shared): State,
    Path(key): Path<String>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let deployment = match shared.admin.deployment(&key).await {
        Ok(Some(deployment)) => deployment,
        Ok(None) => {
            return visit.refuse(
                StatusCode::NOT_FOUND,
                format!("no deployment has key `{key}`"),
            );
        }
        Err(error) => return visit.failure(&error),
    };
    // One line per change, as `cronverb schema diff` prints them: `+`, `-` or `~` first.
    let diff = deployment.diff.as_ref().map(|diff| {
        diff.to_string()
            .lines()
            .map(|line| DiffLine {
                class: match line.as_bytes().first() {
                    Some(b'+') => "added",
                    Some(b'-') => "removed",
                    _ => "changed",
                },
                text: line.to_owned(),
            })
            .collect()
    });
    let page = DeploymentPage {
        title: format!("deployment {key}"),
        key: deployment.key.clone(),
        module: deployment.module.clone(),
        active: deployment.active,
        active_key: deployment.active_deployment.clone(),
        created: format::utc(Some(deployment.created_at)),
        activated: format::utc(deployment.activated_at),
        replicas: deployment
            .replicas
            .iter()
            .map(|r| ReplicaView::new(r, Utc::now()))
            .collect(),
        schema: deployment.schema.to_string(),
        diff,
        base: visit.base.clone(),
    };
    visit.render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    base: String,
    title: String,
    verb: Option<String>,
    limit: u32,
    entries: Vec<AuditView>,
}

/// A row of the audit trail as the page shows it; askama escapes every field.
struct AuditView {
    at: String,
    actor: String,
    from: String,
    action: String,
    verb: String,
    job_href: Option<String>,
    change: String,
    note: String,
}

impl AuditView {
    fn new(base: &str, entry: &AuditEntry) -> AuditView {
        let change = match (&entry.before, &entry.after) {
            (Some(before), Some(after)) if before == after => format!("{after} (unchanged)"),
            (Some(before), Some(after)) => format!("{before} → {after}"),
            (None, Some(after)) => after.to_string(),
            (Some(before), None) => before.to_string(),
            (None, None) => String::new(),
        };
        AuditView {
            at: format::utc(Some(entry.at)),
            actor: entry.actor.clone(),
            from: match &entry.host {
                Some(host) => format!("{} on {host}", entry.origin),
                None => entry.origin.clone(),
            },
            action: entry.action.clone(),
            verb: entry.verb.clone().unwrap_or_default(),
            job_href: entry
                .module
                .as_deref()
                .zip(entry.verb.as_deref())
                .map(|(module, verb)| format::job_href(base, module, verb)),
            change,
            note: entry.note.clone().unwrap_or_default(),
        }
    }
}

/// The query of the audit page: the verb whose actions it shows (docs/dashboard.md, "Routes").
#[derive(Debug, Deserialize)]
pub(super) struct AuditQuery {
    #[serde(default)]
    verb: String,
}

/// `GET /audit`: the audit trail, newest first; `?verb=` keeps one verb's actions.
pub(super) async fn audit(axum::extract::State(shared): State, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let query = match Query::<AuditQuery>::try_from_uri(&parts.uri) {
        Ok(Query(query)) => query,
        Err(_) => return visit.refuse(StatusCode::BAD_REQUEST, "the query is malformed"),
    };
    let verb = Some(query.verb.trim().to_owned()).filter(|v| !v.is_empty());
    let filter = AuditFilter {
        verb: verb.clone(),
        limit: AUDIT_LIMIT,
        ..AuditFilter::default()
    };
    let entries = match shared.admin.audit(&filter).await {
        Ok(entries) => entries,
        Err(error) => return visit.failure(&error),
    };
    let page = AuditPage {
        title: "audit trail".to_owned(),
        verb,
        limit: AUDIT_LIMIT,
        entries: entries
            .iter()
            .map(|e| AuditView::new(&visit.base, e))
            .collect(),
        base: visit.base.clone(),
    };
    visit.render(StatusCode::OK, &page)
}

/// Any other path.
pub(super) async fn not_found(axum::extract::State(shared): State, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    Visit::new(&shared, &parts).refuse(StatusCode::NOT_FOUND, "there is no such page")
}

/// `GET /static/dashboard.css`.
pub(super) async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("static/dashboard.css"),
    )
}

/// `GET /static/dashboard.js`: the refresh of the pages (docs/dashboard.md, "Refreshing").
pub(super) async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("static/dashboard.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}
