//! The dashboard (feature `dashboard`): HTML pages over the operator API, as an axum [`Router`] that an
//! application nests into its own server, or that `cronverb dashboard` serves (docs/dashboard.md).
//!
//! It shows what is wrong first (a module where nothing runs, overdue jobs), then every module with its
//! runs of the last 24 hours, and its deployments, replicas and jobs (filtered by verb and state, a page
//! at a time), a job's history and a deployment's schema, and, when enabled, pauses, resumes and
//! triggers jobs. It is read-only unless [`Dashboard::authorize`] or [`Dashboard::action_token`] is set;
//! every action is a POST with a CSRF token, and is logged with who did what, every request-derived
//! value escaped (docs/dashboard.md, "Security model"). [`serve`] serves it with a header-read timeout.
//!
//! ```no_run
//! # async fn example(store: cronverb::PgStore) -> Result<(), Box<dyn std::error::Error>> {
//! use cronverb::dashboard::{Actor, Dashboard};
//!
//! let dashboard = Dashboard::new(store.admin())
//!     // The application decides who may act, per request (here: whoever its proxy authenticated).
//!     .authorize(|request| {
//!         let user = request.headers.get("x-authenticated-user")?.to_str().ok()?;
//!         Some(Actor { name: user.to_owned() })
//!     });
//! let app = axum::Router::new().nest("/cron", dashboard.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::http::header::{self, HeaderValue};
use axum::http::request::Parts;
use axum::response::Response;
use axum::routing::{get, post};

use crate::admin::Admin;
use crate::{HealthCheck, RuntimeHandle};

mod actions;
mod chart;
mod counts;
mod csrf;
mod escape;
mod format;
mod pages;
mod serve;
mod session;
mod token;

pub use serve::{HEADER_READ_TIMEOUT, serve};
pub use token::{MIN_BITS, MIN_CHARS, WeakToken};

/// The Content-Security-Policy of every response: only the router's own script and style, no inline
/// script or style, no frames, forms posting only to the dashboard's origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Who performs an action, as the authorization hook or the action token says: logged with every
/// action and recorded in a pause's note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The name logged and stored (`alice`, `ops@example.com`).
    pub name: String,
}

/// The hook that decides, per request, who may act.
type Authorize = dyn Fn(&Parts) -> Option<Actor> + Send + Sync;

/// The dashboard's settings; [`Dashboard::router`] makes the router. Read-only unless
/// [`authorize`](Dashboard::authorize) or [`action_token`](Dashboard::action_token) is set.
pub struct Dashboard {
    admin: Admin,
    authorize: Option<Arc<Authorize>>,
    token: Option<String>,
    runtime: Option<HealthCheck>,
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a secret: never shown.
        f.debug_struct("Dashboard")
            .field("authorize", &self.authorize.is_some())
            .field("action_token", &self.token.is_some())
            .field("runtime", &self.runtime.is_some())
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    /// A read-only dashboard over `admin`.
    pub fn new(admin: Admin) -> Self {
        Dashboard {
            admin,
            authorize: None,
            token: None,
            runtime: None,
        }
    }

    /// Enables actions for the requests `hook` returns an [`Actor`] for; the others stay read-only. The
    /// hook sees the request's method, URI, headers and extensions (what the application's own auth
    /// middleware put there).
    pub fn authorize<F>(mut self, hook: F) -> Self
    where
        F: Fn(&Parts) -> Option<Actor> + Send + Sync + 'static,
    {
        self.authorize = Some(Arc::new(hook));
        self
    }

    /// Enables actions for whoever enters `token`, once per browser session, on a job's page
    /// (`cronverb dashboard --allow-actions TOKEN`). With [`authorize`](Dashboard::authorize) too, an
    /// action needs both.
    ///
    /// # Errors
    ///
    /// A token under the minimum strength ([`MIN_CHARS`] characters and [`MIN_BITS`] bits estimated,
    /// docs/dashboard.md, "The action token") is refused: wrong guesses are throttled, but a short or
    /// common token is still found.
    pub fn action_token(mut self, token: impl Into<String>) -> Result<Self, WeakToken> {
        let token = token.into();
        token::check(&token)?;
        self.token = Some(token);
        Ok(self)
    }

    /// `Ok` for a token [`action_token`](Dashboard::action_token) accepts; the [`WeakToken`] saying how
    /// far it is from the minimum otherwise.
    pub fn check_action_token(token: &str) -> Result<(), WeakToken> {
        token::check(token)
    }

    /// The runtime of this process, for the health routes `/health/live` and `/health/ready`
    /// (docs/operations.md, "Health checks"); without it they answer 404. The handle stays the
    /// caller's, to shut the runtime down; the routes report its draining meanwhile.
    pub fn runtime(mut self, handle: &RuntimeHandle) -> Self {
        self.runtime = Some(handle.health_check());
        self
    }

    /// The router: its routes are relative, so that `app.nest("/cron", dashboard.router())` serves the
    /// dashboard under `/cron` (docs/dashboard.md, "Routes").
    pub fn router(self) -> Router {
        let health = self.runtime.map(health_routes);
        let shared = Arc::new(Shared {
            admin: self.admin,
            authorize: self.authorize,
            token: self.token,
            csrf: csrf::Csrf::new(),
            throttle: session::Throttle::default(),
            counts: counts::CountsCache::default(),
        });
        let router = Router::new()
            .route("/", get(pages::overview))
            .route("/jobs/{module}/{verb}", get(pages::job))
            .route("/deployments/{key}", get(pages::deployment))
            .route("/audit", get(pages::audit))
            .route("/jobs/{module}/{verb}/pause", post(actions::pause))
            .route("/jobs/{module}/{verb}/resume", post(actions::resume))
            .route("/jobs/{module}/{verb}/trigger", post(actions::trigger))
            .route("/jobs/{module}/{verb}/cancel", post(actions::cancel))
            .route(
                "/jobs/{module}/{verb}/reschedule",
                post(actions::reschedule),
            )
            .route(
                "/jobs/{module}/{verb}/reschedule/reset",
                post(actions::reset_schedule),
            )
            .route("/jobs/{module}/{verb}/backfill", post(actions::backfill))
            .route(
                "/jobs/{module}/{verb}/backfill/cancel",
                post(actions::cancel_backfill),
            )
            .route("/session", post(actions::start_session))
            .route("/session/end", post(actions::end_session))
            .route("/static/dashboard.css", get(pages::css))
            .route("/static/dashboard.js", get(pages::js))
            .fallback(pages::not_found)
            .layer(axum::middleware::map_response(secure))
            .with_state(shared);
        match health {
            Some(health) => router.merge(health),
            None => router,
        }
    }
}

/// Only the health routes, `/health/live` and `/health/ready`, over `handle`'s runtime: for probes served
/// outside the authentication in front of the dashboard, or without a dashboard (docs/operations.md,
/// "Health checks").
pub fn health(handle: &RuntimeHandle) -> Router {
    health_routes(handle.health_check())
}

/// A read-only dashboard over `admin`: `Dashboard::new(admin).router()`.
pub fn router(admin: Admin) -> Router {
    Dashboard::new(admin).router()
}

/// What the handlers share.
struct Shared {
    admin: Admin,
    authorize: Option<Arc<Authorize>>,
    token: Option<String>,
    csrf: csrf::Csrf,
    /// The count of wrong action tokens, and its lock.
    throttle: session::Throttle,
    /// Each module's runs of the last 24 hours, by outcome.
    counts: counts::CountsCache,
}

impl Shared {
    /// Whether any request may act at all.
    fn actions_enabled(&self) -> bool {
        self.authorize.is_some() || self.token.is_some()
    }

    /// Whether the forms are shown to this request: actions are enabled, and the hook (when there is
    /// one) accepts the request. The token is checked when the form is posted.
    fn may_act(&self, parts: &Parts) -> bool {
        self.actions_enabled()
            && self
                .authorize
                .as_ref()
                .is_none_or(|hook| hook(parts).is_some())
    }
}

type State = axum::extract::State<Arc<Shared>>;

/// The headers of every response: the CSP, no sniffing, no framing, no referrer (a page's URL stays on
/// the page), and no caching of pages that show live state.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// `/health/live` and `/health/ready` over a runtime's health (docs/operations.md, "Health checks"):
/// the [`Health`](crate::Health) report as JSON, 200 when the probe's fact holds and 503 otherwise.
/// Liveness reads only this process (the claim loop goes round, the runtime has not stopped), never
/// the store: a database outage must not restart every replica.
fn health_routes(check: HealthCheck) -> Router {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    fn answer(ok: bool, health: &crate::Health) -> Response {
        let status = if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        let body = serde_json::to_string(health).unwrap_or_default();
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
    let live = check.clone();
    Router::new()
        .route(
            "/health/live",
            get(move || {
                let health = live.health();
                async move { answer(health.live, &health) }
            }),
        )
        .route(
            "/health/ready",
            get(move || {
                let health = check.health();
                async move { answer(health.ready, &health) }
            }),
        )
}
