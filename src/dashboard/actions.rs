//! The actions: pause (with a note), resume, trigger, cancel the run in flight (with a note), backfill
//! (with its window, or cancelled) and reschedule (with its expression, or reset), each a POST from a
//! job's page, and the action
//! token's session (docs/dashboard.md, "Security model"). Each action is refused with nothing changed
//! unless actions are enabled, the form carries the CSRF token of the request's cookie, the
//! authorization hook accepts the request and, where the dashboard has an action token, the request
//! carries a session cookie that the token opened (or the form carries the token). Wrong tokens are
//! throttled (`session.rs`). Every action is logged with who did what, every request-derived value
//! escaped; a pause's stored note names who paused.

use std::time::Duration;

use axum::Form;
use axum::extract::{FromRequest, Path, Request};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::escape::Escaped;
use super::pages::Visit;
use super::{Actor, Shared, State, csrf, format, session};

/// The fields of an action's form.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ActionForm {
    /// The CSRF token: the HMAC of the request's CSRF cookie.
    #[serde(default)]
    csrf: String,
    /// The action token, for a client without a session (a script); the pages' forms leave it out.
    #[serde(default)]
    token: String,
    /// A pause's note, or a cancel's.
    #[serde(default)]
    note: String,
    /// A backfill's window: its start (included) and end (excluded), RFC 3339.
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    /// A reschedule's expression and zone (empty: the code's zone; docs/operations.md, "Changing a
    /// schedule without a build").
    #[serde(default)]
    expression: String,
    #[serde(default)]
    timezone: String,
}

/// The fields of the session's forms.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SessionForm {
    #[serde(default)]
    csrf: String,
    /// The action token (starting a session only).
    #[serde(default)]
    token: String,
    /// The page to go back to: a path under the dashboard.
    #[serde(default)]
    next: String,
}

/// The actions.
#[derive(Debug, Clone, Copy)]
enum Action {
    Pause,
    Resume,
    Trigger,
    /// Queue the occurrences of a window that never ran (docs/operations.md, "Backfill").
    Backfill,
    /// Drop what a backfill queued and has not started.
    CancelBackfill,
    /// Ask the run in flight to stop (docs/operations.md, "Cancelling a run").
    Cancel,
    /// Run another schedule than the code's (docs/operations.md, "Changing a schedule without a
    /// build").
    Reschedule,
    /// Run the code's schedule again.
    ResetSchedule,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Trigger => "trigger",
            Action::Backfill => "backfill",
            Action::CancelBackfill => "cancel backfill",
            Action::Cancel => "cancel",
            Action::Reschedule => "reschedule",
            Action::ResetSchedule => "reset the schedule",
        }
    }
}

/// Why a request may not act: the status and what the page says.
struct Refusal {
    status: StatusCode,
    why: &'static str,
    /// While wrong tokens are locked out: how long yet.
    retry_after: Option<Duration>,
}

impl Refusal {
    fn forbidden(why: &'static str) -> Refusal {
        Refusal {
            status: StatusCode::FORBIDDEN,
            why,
            retry_after: None,
        }
    }

    fn respond(&self, visit: &Visit, back: String) -> Response {
        let message = match self.retry_after {
            Some(wait) => format!(
                "{}: try again in {} s; nothing was changed",
                self.why,
                wait.as_secs_f64().ceil()
            ),
            None => format!("{}: nothing was changed", self.why),
        };
        let mut response = visit.refuse_from(self.status, message, Some(back));
        if let Some(wait) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&format!("{}", wait.as_secs_f64().ceil()))
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

/// `POST /jobs/{module}/{verb}/pause`, with a note.
pub(super) async fn pause(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Pause).await
}

/// `POST /jobs/{module}/{verb}/resume`.
pub(super) async fn resume(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Resume).await
}

/// `POST /jobs/{module}/{verb}/trigger`.
pub(super) async fn trigger(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Trigger).await
}

/// `POST /jobs/{module}/{verb}/cancel`, with an optional note.
pub(super) async fn cancel(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Cancel).await
}

/// `POST /jobs/{module}/{verb}/backfill`, with the window's `from` and `to`.
pub(super) async fn backfill(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Backfill).await
}

/// `POST /jobs/{module}/{verb}/backfill/cancel`.
pub(super) async fn cancel_backfill(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::CancelBackfill).await
}

/// `POST /jobs/{module}/{verb}/reschedule`, with the `expression`, its `timezone` and a `note`.
pub(super) async fn reschedule(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::Reschedule).await
}

/// `POST /jobs/{module}/{verb}/reschedule/reset`.
pub(super) async fn reset_schedule(
    state: State,
    path: Path<(String, String)>,
    request: Request,
) -> Response {
    act(state, path, request, Action::ResetSchedule).await
}

/// An instant of a backfill's form, RFC 3339.
fn instant(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|at| at.with_timezone(&chrono::Utc))
}

async fn act(
    axum::extract::State(shared): State,
    Path((module, verb)): Path<(String, String)>,
    request: Request,
    action: Action,
) -> Response {
    let (parts, body) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    if !shared.actions_enabled() {
        return visit.refuse(
            StatusCode::FORBIDDEN,
            "this dashboard is read-only: nothing was changed",
        );
    }
    let form = match Form::<ActionForm>::from_request(Request::from_parts(parts.clone(), body), &())
        .await
    {
        Ok(Form(form)) => form,
        Err(_) => {
            return visit.refuse(
                StatusCode::BAD_REQUEST,
                "the form is malformed: nothing was changed",
            );
        }
    };
    let actor = match authorize(&shared, &parts, &visit, &form) {
        Ok(actor) => actor,
        Err(refusal) => {
            tracing::warn!(
                target: "cronverb::dashboard",
                action = action.name(),
                module = %Escaped(&module),
                verb = %Escaped(&verb),
                why = refusal.why,
                "dashboard action refused"
            );
            return refusal.respond(&visit, format::job_href(&visit.base, &module, &verb));
        }
    };
    let note = form.note.trim();
    // The audit trail records the request's actor, from the dashboard, on this host.
    let admin = shared.admin.clone().with_actor(crate::admin::Actor::new(
        actor.name.clone(),
        crate::admin::Origin::Dashboard,
    ));
    let result = match action {
        Action::Pause => {
            if note.is_empty() {
                return visit.refuse(
                    StatusCode::BAD_REQUEST,
                    "a pause needs a note saying why: nothing was changed",
                );
            }
            let note = format!("{note} (paused by {})", actor.name);
            admin
                .pause(&verb, Some(&module), Some(&note))
                .await
                .map(drop)
        }
        Action::Resume => admin.resume(&verb, Some(&module)).await.map(drop),
        Action::Trigger => admin.trigger(&verb, Some(&module)).await.map(drop),
        Action::Backfill => {
            let (Some(from), Some(to)) = (instant(&form.from), instant(&form.to)) else {
                return visit.refuse(
                    StatusCode::BAD_REQUEST,
                    "a backfill needs its window as RFC 3339 instants, such as \
                     `2026-03-01T00:00:00Z`: nothing was changed",
                );
            };
            admin
                .backfill(&verb, Some(&module), from, to, false)
                .await
                .map(drop)
        }
        Action::CancelBackfill => admin.cancel_backfill(&verb, Some(&module)).await.map(drop),
        Action::Cancel => {
            let note = (!note.is_empty()).then_some(note);
            admin.cancel(&verb, Some(&module), note).await.map(drop)
        }
        Action::Reschedule => {
            let expression = form.expression.trim();
            // The same engine and the same caret as `cronverb check` (docs/dashboard.md, "Actions").
            if let Err(error) = cron_schema::Schedule::parse(expression) {
                return visit.refuse_showing(
                    StatusCode::BAD_REQUEST,
                    "the expression does not parse: nothing was changed",
                    Some(format::job_href(&visit.base, &module, &verb)),
                    Some(error.render(expression)),
                );
            }
            let zone = Some(form.timezone.trim()).filter(|zone| !zone.is_empty());
            let note = Some(note).filter(|note| !note.is_empty());
            admin
                .reschedule(&verb, Some(&module), expression, zone, note)
                .await
                .map(drop)
        }
        Action::ResetSchedule => admin
            .reset_schedule(&verb, Some(&module), None)
            .await
            .map(drop),
    };
    if let Err(error) = result {
        tracing::warn!(
            target: "cronverb::dashboard",
            actor = %Escaped(&actor.name),
            action = action.name(),
            module = %Escaped(&module),
            verb = %Escaped(&verb),
            error = %Escaped(&error.to_string()),
            "dashboard action failed"
        );
        return visit.failure(&error);
    }
    tracing::info!(
        target: "cronverb::dashboard",
        actor = %Escaped(&actor.name),
        action = action.name(),
        module = %Escaped(&module),
        verb = %Escaped(&verb),
        note = (matches!(action, Action::Pause | Action::Cancel | Action::Reschedule))
            .then(|| Escaped(note).to_string()),
        expression = (matches!(action, Action::Reschedule))
            .then(|| Escaped(form.expression.trim()).to_string()),
        window = (matches!(action, Action::Backfill))
            .then(|| format!("{} to {}", Escaped(form.from.trim()), Escaped(form.to.trim()))),
        at = %chrono::Utc::now().to_rfc3339(),
        "dashboard action"
    );
    // Post/redirect/get: back to the job's page.
    see_other(&format::job_href(&visit.base, &module, &verb))
}

/// Who acts, or why the request may not.
fn authorize(
    shared: &Shared,
    parts: &Parts,
    visit: &Visit,
    form: &ActionForm,
) -> Result<Actor, Refusal> {
    check_csrf(shared, parts, &form.csrf)?;
    let actor =
        match &shared.authorize {
            Some(hook) => Some(hook(parts).ok_or_else(|| {
                Refusal::forbidden("you are not allowed to act on this dashboard")
            })?),
            None => None,
        };
    if let Some(token) = &shared.token
        && !visit.session
    {
        if form.token.is_empty() {
            return Err(Refusal::forbidden(
                "the action token was not entered in this browser session: enter it on the job's page",
            ));
        }
        check_token(shared, &form.token, token)?;
    }
    Ok(actor.unwrap_or_else(|| Actor {
        name: "the holder of the action token".to_owned(),
    }))
}

/// The request's CSRF cookie, and the form's token of it.
fn check_csrf(shared: &Shared, parts: &Parts, token: &str) -> Result<(), Refusal> {
    let nonce = csrf::cookie(&parts.headers)
        .ok_or_else(|| Refusal::forbidden("the CSRF cookie is missing: reload the page"))?;
    if shared.csrf.verify(&nonce, token) {
        Ok(())
    } else {
        Err(Refusal::forbidden(
            "the CSRF token is missing or stale: reload the page",
        ))
    }
}

/// `given` against the action token, through the throttle: refused unchecked while wrong tokens are
/// locked out, and counted when wrong.
fn check_token(shared: &Shared, given: &str, token: &str) -> Result<(), Refusal> {
    let now = tokio::time::Instant::now();
    if let Err(wait) = shared.throttle.check(now) {
        return Err(Refusal {
            status: StatusCode::TOO_MANY_REQUESTS,
            why: "too many wrong action tokens",
            retry_after: Some(wait),
        });
    }
    if shared.csrf.same_secret(given, token) {
        shared.throttle.succeeded();
        Ok(())
    } else {
        shared.throttle.failed(now);
        Err(Refusal::forbidden("the action token is wrong"))
    }
}

/// `POST /session`: the action token, entered once; a right one sets the session cookie and goes back
/// to the page the form was on.
pub(super) async fn start_session(
    axum::extract::State(shared): State,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let Some(token) = &shared.token else {
        return visit.refuse(
            StatusCode::NOT_FOUND,
            "this dashboard has no action token: nothing was changed",
        );
    };
    let Ok(Form(form)) =
        Form::<SessionForm>::from_request(Request::from_parts(parts.clone(), body), &()).await
    else {
        return visit.refuse(
            StatusCode::BAD_REQUEST,
            "the form is malformed: nothing was changed",
        );
    };
    let checked = check_csrf(&shared, &parts, &form.csrf).and_then(|()| {
        shared
            .authorize
            .as_ref()
            .is_none_or(|hook| hook(&parts).is_some())
            .then_some(())
            .ok_or_else(|| Refusal::forbidden("you are not allowed to act on this dashboard"))
    });
    if let Err(refusal) = checked.and_then(|()| check_token(&shared, &form.token, token)) {
        tracing::warn!(
            target: "cronverb::dashboard",
            why = refusal.why,
            "dashboard session refused"
        );
        return refusal.respond(&visit, next(&visit.base, &form.next));
    }
    tracing::info!(target: "cronverb::dashboard", "dashboard session started");
    let expires = chrono::Utc::now().timestamp() + session::LIFETIME.as_secs() as i64;
    let value = session::issue(&shared.csrf, expires);
    let mut response = see_other(&next(&visit.base, &form.next));
    if let Some(cookie) = visit.cookie(session::COOKIE, &value, Some(session::LIFETIME.as_secs())) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// `POST /session/end`: clears the session cookie.
pub(super) async fn end_session(axum::extract::State(shared): State, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let visit = Visit::new(&shared, &parts);
    let Ok(Form(form)) =
        Form::<SessionForm>::from_request(Request::from_parts(parts.clone(), body), &()).await
    else {
        return visit.refuse(
            StatusCode::BAD_REQUEST,
            "the form is malformed: nothing was changed",
        );
    };
    if let Err(refusal) = check_csrf(&shared, &parts, &form.csrf) {
        return refusal.respond(&visit, next(&visit.base, &form.next));
    }
    let mut response = see_other(&next(&visit.base, &form.next));
    if let Some(cookie) = visit.cookie(session::COOKIE, "", Some(0)) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// Where a session's form goes back to: `next` when it is a path of this dashboard's (no other origin,
/// no scheme, no `//`), else the overview.
fn next(base: &str, next: &str) -> String {
    let inside = next
        .strip_prefix(base)
        .is_some_and(|rest| rest.starts_with('/') && !rest.starts_with("//"));
    if inside && !next.contains(['\\', '\r', '\n']) && !next.chars().any(char::is_control) {
        next.to_owned()
    } else {
        format!("{base}/")
    }
}

/// A 303 to `href`.
fn see_other(href: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(href) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::next;

    #[test]
    fn a_session_goes_back_only_inside_the_dashboard() {
        assert_eq!(next("", "/jobs/a/b"), "/jobs/a/b");
        assert_eq!(next("/cron", "/cron/jobs/a/b"), "/cron/jobs/a/b");
        for outside in [
            "",
            "//evil.example/x",
            "https://evil.example/",
            "/\\evil",
            "/cronx",
            "x",
        ] {
            assert_eq!(next("/cron", outside), "/cron/", "{outside}");
        }
        assert_eq!(next("", "//evil.example"), "/");
    }
}
