//! The actions: pause (with a note), resume and trigger, each a POST from a job's page
//! (docs/dashboard.md, "Security model"). Each is refused with nothing changed unless actions are
//! enabled, the form carries the CSRF token of the request's cookie, the authorization hook accepts the
//! request and the form carries the action token (each where it is set). Every action is logged with who
//! did what; a pause's stored note names who paused.

use axum::Form;
use axum::extract::{FromRequest, Path, Request};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::pages::Visit;
use super::{Actor, Shared, State, csrf, format};

/// The fields of an action's form.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ActionForm {
    /// The CSRF token: the HMAC of the request's CSRF cookie.
    #[serde(default)]
    csrf: String,
    /// The action token (`--allow-actions`), when the dashboard has one.
    #[serde(default)]
    token: String,
    /// A pause's note.
    #[serde(default)]
    note: String,
}

/// The three actions.
#[derive(Debug, Clone, Copy)]
enum Action {
    Pause,
    Resume,
    Trigger,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Trigger => "trigger",
        }
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
    let actor = match authorize(&shared, &parts, &form) {
        Ok(actor) => actor,
        Err(why) => {
            tracing::warn!(
                target: "cronverb::dashboard",
                action = action.name(),
                module = %module,
                verb = %verb,
                why,
                "dashboard action refused"
            );
            return visit.refuse(StatusCode::FORBIDDEN, format!("{why}: nothing was changed"));
        }
    };
    let note = form.note.trim();
    let result = match action {
        Action::Pause => {
            if note.is_empty() {
                return visit.refuse(
                    StatusCode::BAD_REQUEST,
                    "a pause needs a note saying why: nothing was changed",
                );
            }
            let note = format!("{note} (paused by {})", actor.name);
            shared
                .admin
                .pause(&verb, Some(&module), Some(&note))
                .await
                .map(drop)
        }
        Action::Resume => shared.admin.resume(&verb, Some(&module)).await.map(drop),
        Action::Trigger => shared.admin.trigger(&verb, Some(&module)).await.map(drop),
    };
    if let Err(error) = result {
        tracing::warn!(
            target: "cronverb::dashboard",
            actor = %actor.name,
            action = action.name(),
            module = %module,
            verb = %verb,
            %error,
            "dashboard action failed"
        );
        return visit.failure(&error);
    }
    tracing::info!(
        target: "cronverb::dashboard",
        actor = %actor.name,
        action = action.name(),
        module = %module,
        verb = %verb,
        note = (matches!(action, Action::Pause)).then_some(note),
        at = %chrono::Utc::now().to_rfc3339(),
        "dashboard action"
    );
    // Post/redirect/get: back to the job's page.
    let href = format::job_href(&visit.base, &module, &verb);
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(&href) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Who acts, or why the request may not.
fn authorize(
    shared: &Shared,
    parts: &axum::http::request::Parts,
    form: &ActionForm,
) -> Result<Actor, &'static str> {
    let nonce =
        csrf::cookie(&parts.headers).ok_or("the CSRF cookie is missing: reload the page")?;
    if !shared.csrf.verify(&nonce, &form.csrf) {
        return Err("the CSRF token is missing or stale: reload the page");
    }
    let actor = match &shared.authorize {
        Some(hook) => Some(hook(parts).ok_or("you are not allowed to act on this dashboard")?),
        None => None,
    };
    if let Some(token) = &shared.token
        && !shared.csrf.same_secret(&form.token, token)
    {
        return Err("the action token is missing or wrong");
    }
    Ok(actor.unwrap_or_else(|| Actor {
        name: "the holder of the action token".to_owned(),
    }))
}
