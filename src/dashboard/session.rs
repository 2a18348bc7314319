//! The action token entered once per browser session (docs/dashboard.md, "The action token"), and the
//! throttle of wrong tokens.
//!
//! A right token posted to `/session` sets the cookie `cronverb_session=<expiry>.<nonce>.<HMAC>`
//! (`HttpOnly`, `SameSite=Strict`, `Secure` over TLS): the HMAC, under the router's key, of its expiry
//! and a random nonce. An action with a cookie whose HMAC holds and whose expiry is ahead needs no
//! token field; a restart (a new key) or [`LIFETIME`] ends every session.
//!
//! Every wrong token (in the session form or an action's form) counts: from the [`FREE_FAILURES`]th,
//! every token is refused unchecked (429, `Retry-After`) for a lock that doubles with each further
//! failure, from one second up to [`MAX_LOCK`]; [`FORGET_AFTER`] without a failure forgets them. The
//! count is the router's, not a client's: an address behind a proxy names no one, and a global lock
//! slows a distributed guess as much as a single one. Those already in a session keep acting.

use std::sync::Mutex;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header;
use tokio::time::Instant;

use super::csrf::{Csrf, named_cookie};

/// The session cookie's name.
pub(super) const COOKIE: &str = "cronverb_session";

/// How long a session lasts.
pub(super) const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Wrong tokens before the lock: the fifth locks.
pub(super) const FREE_FAILURES: u32 = 5;

/// The longest lock.
pub(super) const MAX_LOCK: Duration = Duration::from_secs(15 * 60);

/// How long without a wrong token before the count starts again.
pub(super) const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);

/// A new session's cookie value, ending at `expires` (Unix seconds).
pub(super) fn issue(csrf: &Csrf, expires: i64) -> String {
    let signed = format!("{expires}.{}", csrf.nonce());
    let mac = csrf.token(&format!("session:{signed}"));
    format!("{signed}.{mac}")
}

/// Whether the request's session cookie is one this router issued and has not expired at `now` (Unix
/// seconds).
pub(super) fn valid(csrf: &Csrf, headers: &HeaderMap, now: i64) -> bool {
    let Some(value) = named_cookie(headers, COOKIE) else {
        return false;
    };
    let Some((signed, mac)) = value.rsplit_once('.') else {
        return false;
    };
    let Some((expires, _nonce)) = signed.split_once('.') else {
        return false;
    };
    let Ok(expires) = expires.parse::<i64>() else {
        return false;
    };
    expires > now && csrf.verify_mac(&format!("session:{signed}"), mac)
}

/// Whether the request came over TLS, as far as the request can say: an `https` URI, or a proxy's
/// `X-Forwarded-Proto: https` or `Forwarded: proto=https`. The cookies are then `Secure`. A wrong header
/// only makes a cookie `Secure` that did not need to be: the browser then keeps it off plain HTTP.
pub(super) fn over_tls(uri: &axum::http::Uri, headers: &HeaderMap) -> bool {
    let forwarded = |name: header::HeaderName| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .map(str::to_ascii_lowercase)
            .collect::<Vec<_>>()
    };
    uri.scheme_str() == Some("https")
        || forwarded(header::HeaderName::from_static("x-forwarded-proto"))
            .iter()
            .any(|value| value.split(',').next().map(str::trim) == Some("https"))
        || forwarded(header::FORWARDED).iter().any(|value| {
            value
                .split([';', ','])
                .any(|pair| pair.trim() == "proto=https")
        })
}

/// The count of wrong tokens, and the lock it sets.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    state: Mutex<Failures>,
}

#[derive(Debug, Default)]
struct Failures {
    count: u32,
    last: Option<Instant>,
    locked_until: Option<Instant>,
}

impl Throttle {
    /// `Err(how long)` while locked: the token is then refused without being compared.
    pub(super) fn check(&self, now: Instant) -> Result<(), Duration> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.locked_until {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// A wrong token at `now`: counts it, and locks from the [`FREE_FAILURES`]th.
    pub(super) fn failed(&self, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state
            .last
            .is_some_and(|last| now.saturating_duration_since(last) >= FORGET_AFTER)
        {
            state.count = 0;
        }
        state.count = state.count.saturating_add(1);
        state.last = Some(now);
        if state.count >= FREE_FAILURES {
            let doublings = (state.count - FREE_FAILURES).min(20);
            let lock = Duration::from_secs(1u64 << doublings).min(MAX_LOCK);
            state.locked_until = Some(now + lock);
        }
    }

    /// A right token: the count starts again.
    pub(super) fn succeeded(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Failures::default();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::{HeaderMap, HeaderValue, header};
    use tokio::time::Instant;

    use super::{FORGET_AFTER, FREE_FAILURES, MAX_LOCK, Throttle, issue, over_tls, valid};
    use crate::dashboard::csrf::Csrf;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; cronverb_session={value}")).unwrap(),
        );
        headers
    }

    #[test]
    fn a_session_holds_until_it_expires_and_only_for_its_router() {
        let csrf = Csrf::new();
        let value = issue(&csrf, 1_000);
        assert!(valid(&csrf, &with_cookie(&value), 999));
        assert!(!valid(&csrf, &with_cookie(&value), 1_000));
        assert!(!valid(&Csrf::new(), &with_cookie(&value), 999));
        // A later expiry with the same MAC is refused: the expiry is signed.
        let forged = value.replacen("1000.", "9999.", 1);
        assert!(!valid(&csrf, &with_cookie(&forged), 999));
        assert!(!valid(&csrf, &with_cookie(""), 0));
        assert!(!valid(&csrf, &HeaderMap::new(), 0));
    }

    #[test]
    fn wrong_tokens_lock_after_the_free_ones_doubling_to_the_maximum() {
        let throttle = Throttle::default();
        let start = Instant::now();
        for _ in 1..FREE_FAILURES {
            throttle.failed(start);
            assert_eq!(throttle.check(start), Ok(()));
        }
        throttle.failed(start);
        assert_eq!(throttle.check(start), Err(Duration::from_secs(1)));
        let later = start + Duration::from_secs(1);
        assert_eq!(throttle.check(later), Ok(()));
        throttle.failed(later);
        assert_eq!(throttle.check(later), Err(Duration::from_secs(2)));
        for _ in 0..30 {
            throttle.failed(later);
        }
        assert_eq!(throttle.check(later), Err(MAX_LOCK));
        // Forgotten after a quiet while; a right token forgets them too.
        let quiet = later + MAX_LOCK + FORGET_AFTER;
        throttle.failed(quiet);
        assert_eq!(throttle.check(quiet), Ok(()));
        throttle.succeeded();
        for _ in 1..FREE_FAILURES {
            throttle.failed(quiet);
        }
        assert_eq!(throttle.check(quiet), Ok(()));
    }

    #[test]
    fn tls_is_read_from_the_uri_or_the_proxy() {
        let plain: axum::http::Uri = "/x".parse().unwrap();
        assert!(!over_tls(&plain, &HeaderMap::new()));
        assert!(over_tls(&"https://a/x".parse().unwrap(), &HeaderMap::new()));
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS"));
        assert!(over_tls(&plain, &headers));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::FORWARDED,
            HeaderValue::from_static("for=1.2.3.4;proto=https"),
        );
        assert!(over_tls(&plain, &headers));
    }
}
