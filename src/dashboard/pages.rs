//! The pages: the overview, a job's page, a deployment's page, the refusals, and the static files.

use askama::Template;
use axum::extract::{OriginalUri, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use crate::admin::{AdminError, JobStatus, ModuleStatus, Run, RunFilter};

use super::chart::{self, Chart};
use super::{Shared, State, csrf, format};

/// How many runs a job's page lists.
pub(super) const PAGE_RUNS: u32 = 50;

/// What every page knows of its request: where the dashboard is, whether this visitor may act, and the
/// CSRF cookie (a new one is set with the response).
pub(super) struct Visit {
    pub(super) base: String,
    may_act: bool,
    token_field: bool,
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
        Visit {
            base,
            may_act,
            token_field: shared.token.is_some(),
            nonce,
            new_nonce,
        }
    }

    /// The forms of a job's page, when this visitor may act.
    fn actions(&self, shared: &Shared, href: &str, paused: bool) -> Option<Actions> {
        let nonce = self.nonce.as_ref().filter(|_| self.may_act)?;
        Some(Actions {
            href: href.to_owned(),
            csrf: shared.csrf.token(nonce),
            token_field: self.token_field,
            paused,
        })
    }

    /// `html` with `status`, and the CSRF cookie when this visit made one.
    pub(super) fn respond(&self, status: StatusCode, html: String) -> Response {
        let mut response = (status, Html(html)).into_response();
        if let (true, Some(nonce)) = (self.new_nonce, &self.nonce) {
            let path = if self.base.is_empty() {
                "/"
            } else {
                &self.base
            };
            let cookie = format!(
                "{}={nonce}; Path={path}; HttpOnly; SameSite=Strict",
                csrf::COOKIE
            );
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
        }
        response
    }

    /// A page saying why a request was refused or failed; nothing was changed.
    pub(super) fn refuse(&self, status: StatusCode, message: impl Into<String>) -> Response {
        let page = Refused {
            base: self.base.clone(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            message: message.into(),
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
            _ if error.is_invalid_input() => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::warn!(target: "cronverb::dashboard", %error, "dashboard page failed");
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
    csrf: String,
    /// Whether the form asks for the action token.
    token_field: bool,
    paused: bool,
}

#[derive(Template)]
#[template(path = "refused.html")]
struct Refused {
    base: String,
    title: String,
    status: u16,
    message: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    base: String,
    title: String,
    now: String,
    modules: Vec<ModuleView>,
}

struct ModuleView {
    name: String,
    active: Option<String>,
    deployments: Vec<DeploymentView>,
    jobs: Vec<JobView>,
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
    href: String,
    deployment: String,
    expression: String,
    reading: String,
    zone: String,
    next_local: String,
    next_utc: String,
    next_machine: String,
    missed: String,
    /// `outcome-…` of the last run, with its outcome, duration and lateness.
    last: Option<LastView>,
    paused: Option<PausedView>,
    executing: Option<ExecutingView>,
    triggered: Option<String>,
    broken: Option<String>,
    overdue: Option<String>,
}

struct LastView {
    outcome: String,
    class: String,
    scheduled: String,
    duration: String,
    lateness: String,
    manual: bool,
    error: Option<String>,
}

struct PausedView {
    note: String,
    since: String,
}

struct ExecutingView {
    replica: String,
    since: String,
    lease_end: String,
}

impl JobView {
    fn new(base: &str, module: &str, job: &JobStatus) -> JobView {
        let reading = match cron_schema::Schedule::parse(&job.expression) {
            Ok(schedule) => schedule.describe(),
            Err(_) => "does not parse".to_owned(),
        };
        JobView {
            verb: job.verb.clone(),
            href: format::job_href(base, module, &job.verb),
            deployment: job.deployment.clone(),
            expression: job.expression.clone(),
            reading,
            zone: job.timezone.clone(),
            next_local: format::zoned(job.next_execution, &job.timezone),
            next_utc: format::utc(job.next_execution),
            next_machine: format::machine(job.next_execution),
            missed: job.missed.clone(),
            last: job.last_run.as_ref().map(|run| LastView {
                outcome: run.outcome.clone(),
                class: format!("outcome-{}", run.outcome),
                scheduled: format::utc(Some(run.scheduled_at)),
                duration: format::span(run.started_at, run.finished_at),
                lateness: format::span(Some(run.scheduled_at), run.started_at),
                manual: run.manual,
                error: run.error.clone(),
            }),
            paused: job.paused.then(|| PausedView {
                note: job.pause_note.clone().unwrap_or_default(),
                since: format::utc(job.paused_at),
            }),
            executing: (job.state == "executing").then(|| match &job.running {
                Some(running) => ExecutingView {
                    replica: running.runner.clone(),
                    since: format::utc(running.started_at),
                    lease_end: format::utc(running.lease_expires_at),
                },
                None => ExecutingView {
                    replica: "—".to_owned(),
                    since: "—".to_owned(),
                    lease_end: "—".to_owned(),
                },
            }),
            triggered: job.trigger_requested_at.map(|at| format::utc(Some(at))),
            broken: job.broken.clone(),
            overdue: job
                .overdue_secs
                .map(|secs| format::millis(secs.saturating_mul(1000) as i64)),
        }
    }
}

fn module_view(base: &str, module: &ModuleStatus) -> ModuleView {
    ModuleView {
        name: module.name.clone(),
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
                replicas: d.replicas.iter().map(ReplicaView::new).collect(),
            })
            .collect(),
        jobs: module
            .jobs
            .iter()
            .map(|job| JobView::new(base, &module.name, job))
            .collect(),
    }
}

/// `GET /`: every module, its deployments and jobs.
pub(super) async fn overview(axum::extract::State(shared): State, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let status = match shared.admin.status(None).await {
        Ok(status) => status,
        Err(error) => return visit.failure(&error),
    };
    let page = Overview {
        title: "cronverb".to_owned(),
        now: format::utc(Some(status.now)),
        modules: status
            .modules
            .iter()
            .map(|m| module_view(&visit.base, m))
            .collect(),
        base: visit.base.clone(),
    };
    visit.render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    base: String,
    title: String,
    module: String,
    job: Option<JobView>,
    runs: Vec<RunView>,
    chart: Chart,
    chart_width: u32,
    chart_height: u32,
    /// The next page of older runs.
    older: Option<String>,
    /// The first page, when this is not it.
    newest: Option<String>,
    actions: Option<Actions>,
}

struct RunView {
    id: i64,
    outcome: String,
    class: String,
    manual: bool,
    late: bool,
    scheduled: String,
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
    fn new(run: &Run) -> RunView {
        RunView {
            id: run.id,
            outcome: run.outcome.clone(),
            class: format!("outcome-{}", run.outcome),
            manual: run.manual,
            late: run.late,
            scheduled: format::utc(Some(run.scheduled_at)),
            started: format::utc(run.started_at),
            finished: format::utc(run.finished_at),
            duration: format::span(run.started_at, run.finished_at),
            lateness: format::span(Some(run.scheduled_at), run.started_at),
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
    let page = JobPage {
        title: verb.clone(),
        module: module.clone(),
        job: job.map(|job| JobView::new(&visit.base, &module, job)),
        chart: chart::chart(&runs),
        chart_width: chart::WIDTH,
        chart_height: chart::HEIGHT,
        runs: runs.iter().map(RunView::new).collect(),
        older,
        newest: before.map(|_| href.clone()),
        actions: job.and_then(|job| visit.actions(&shared, &href, job.paused)),
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
    live: bool,
}

impl ReplicaView {
    fn new(replica: &crate::admin::Replica) -> ReplicaView {
        ReplicaView {
            name: replica.name.clone(),
            started: format::utc(Some(replica.started_at)),
            last_seen: format::utc(Some(replica.last_seen)),
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
        replicas: deployment.replicas.iter().map(ReplicaView::new).collect(),
        schema: deployment.schema.to_string(),
        diff,
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
