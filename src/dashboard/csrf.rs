//! CSRF tokens, signed double-submit (docs/dashboard.md, "Security model"): a page sets a random value in
//! a `SameSite=Strict`, `HttpOnly` cookie and puts its HMAC, under a key only this process knows, in
//! every form. A POST is accepted only when its form's token is the HMAC of its cookie: another site can
//! neither read the cookie nor compute the HMAC.

use axum::http::HeaderMap;
use axum::http::header;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The cookie's name.
pub(super) const COOKIE: &str = "cronverb_csrf";

/// The bytes of the cookie's random value.
const NONCE_BYTES: usize = 32;

/// The key of one router: random, made when the router is, so that a restart invalidates old forms.
pub(super) struct Csrf {
    key: [u8; 32],
}

impl Csrf {
    pub(super) fn new() -> Csrf {
        let mut key = [0; 32];
        getrandom::fill(&mut key).expect("the operating system's random source failed");
        Csrf { key }
    }

    /// A new cookie value: random, hex.
    pub(super) fn nonce(&self) -> String {
        let mut nonce = [0; NONCE_BYTES];
        getrandom::fill(&mut nonce).expect("the operating system's random source failed");
        hex(&nonce)
    }

    /// The form token of cookie value `nonce`.
    pub(super) fn token(&self, nonce: &str) -> String {
        hex(&self.mac(nonce).finalize().into_bytes())
    }

    /// Whether `token` is the form token of `nonce` (compared in constant time).
    pub(super) fn verify(&self, nonce: &str, token: &str) -> bool {
        match unhex(token) {
            Some(bytes) => is_nonce(nonce) && self.mac(nonce).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }

    /// Whether `mac` (hex) is the HMAC of `message` (compared in constant time).
    pub(super) fn verify_mac(&self, message: &str, mac: &str) -> bool {
        unhex(mac).is_some_and(|bytes| self.mac(message).verify_slice(&bytes).is_ok())
    }

    /// Whether `given` is `secret`, compared without a timing that tells how much of it matched (their
    /// HMACs are compared in constant time).
    pub(super) fn same_secret(&self, given: &str, secret: &str) -> bool {
        let expected = self.mac(secret).finalize().into_bytes();
        self.mac(given).verify_slice(&expected).is_ok()
    }

    fn mac(&self, nonce: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(nonce.as_bytes());
        mac
    }
}

/// The request's CSRF cookie, when it has a well-formed one.
pub(super) fn cookie(headers: &HeaderMap) -> Option<String> {
    named_cookie(headers, COOKIE).filter(|value| is_nonce(value))
}

/// The value of the cookie `name` of a request (the session's cookie is read the same way).
pub(super) fn named_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

fn is_nonce(value: &str) -> bool {
    value.len() == 2 * NONCE_BYTES && value.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Csrf;

    #[test]
    fn a_token_holds_for_its_cookie_only() {
        let csrf = Csrf::new();
        let nonce = csrf.nonce();
        let token = csrf.token(&nonce);
        assert!(csrf.verify(&nonce, &token));
        assert!(!csrf.verify(&csrf.nonce(), &token));
        assert!(!csrf.verify(&nonce, ""));
        assert!(!csrf.verify(&nonce, &token[2..]));
        // Another router (another key) does not accept it.
        assert!(!Csrf::new().verify(&nonce, &token));
    }
}
