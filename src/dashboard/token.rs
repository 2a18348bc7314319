//! The minimum strength of an action token (docs/dashboard.md, "The action token"): at least
//! [`MIN_CHARS`] characters and [`MIN_BITS`] bits estimated. The estimate is the length of the token's
//! shortest repeating unit (the whole token unless it repeats itself, as `passwordpassword` does) times
//! the smaller of two figures per character: the bits of the alphabet its characters span (16 for hex
//! digits only, else 26 per letter case, 10 for digits, 33 for anything else), and the Shannon entropy
//! of its own characters (which one character many times keeps low). It is an upper bound for text a
//! person chose, and close to the truth for a random string: `openssl rand -hex 16` (32 hex digits) is
//! about 120 bits.

use std::collections::BTreeMap;
use std::fmt;

/// The fewest characters an action token may have.
pub const MIN_CHARS: usize = 16;

/// The fewest bits an action token's estimated strength may have: even unthrottled, at the 2,700
/// guesses a second that a loop of POSTs reached, 2^80 guesses take over 10^13 years; a phrase a person
/// chose that passes the estimate is still far out of reach of the throttled rate (docs/dashboard.md).
pub const MIN_BITS: f64 = 80.0;

/// An action token under the minimum strength, refused by
/// [`Dashboard::action_token`](super::Dashboard::action_token) and `cronverb dashboard --allow-actions`.
#[derive(Debug, Clone, PartialEq)]
pub struct WeakToken {
    /// The token's length in characters.
    pub chars: usize,
    /// Its estimated strength in bits.
    pub bits: f64,
}

impl fmt::Display for WeakToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the action token is too weak: {} character{}, about {:.0} bits estimated; it needs at \
             least {MIN_CHARS} characters and {MIN_BITS:.0} bits, such as a random string from \
             `openssl rand -hex 16`",
            self.chars,
            if self.chars == 1 { "" } else { "s" },
            self.bits
        )
    }
}

impl std::error::Error for WeakToken {}

/// `Ok` for a token of the minimum strength, the [`WeakToken`] saying how far it is otherwise.
pub fn check(token: &str) -> Result<(), WeakToken> {
    let chars = token.chars().count();
    let bits = estimate(token);
    if chars >= MIN_CHARS && bits >= MIN_BITS {
        Ok(())
    } else {
        Err(WeakToken { chars, bits })
    }
}

/// The estimated strength of `token` in bits (the module's doc says how).
pub(super) fn estimate(token: &str) -> f64 {
    let chars = token.chars().count();
    if chars == 0 {
        return 0.0;
    }
    let hex = token
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        || token
            .chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c));
    let alphabet: u32 = if hex {
        16
    } else {
        let has = |class: fn(&char) -> bool| token.chars().any(|c| class(&c));
        [
            (has(char::is_ascii_lowercase), 26),
            (has(char::is_ascii_uppercase), 26),
            (has(char::is_ascii_digit), 10),
            (has(|c| !c.is_ascii_alphanumeric()), 33),
        ]
        .iter()
        .filter(|(present, _)| *present)
        .map(|(_, size)| size)
        .sum()
    };
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    for c in token.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let shannon: f64 = counts
        .values()
        .map(|&n| {
            let p = n as f64 / chars as f64;
            p * (1.0 / p).log2()
        })
        .sum();
    period(&token.chars().collect::<Vec<_>>()) as f64 * f64::from(alphabet).log2().min(shannon)
}

/// The length of the shortest `p` with `text[i] == text[i - p]` for every `i >= p`: the unit that the
/// text repeats (its length when it repeats nothing). The prefix function of Knuth, Morris and Pratt.
fn period(text: &[char]) -> usize {
    let mut border = vec![0; text.len()];
    for i in 1..text.len() {
        let mut k = border[i - 1];
        while k > 0 && text[i] != text[k] {
            k = border[k - 1];
        }
        if text[i] == text[k] {
            k += 1;
        }
        border[i] = k;
    }
    text.len() - border.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{check, estimate, period};

    #[test]
    fn the_repeating_unit_is_found() {
        let of = |text: &str| period(&text.chars().collect::<Vec<_>>());
        assert_eq!(of("passwordpasswordpass"), 8);
        assert_eq!(of("aaaa"), 1);
        assert_eq!(of("abcd"), 4);
        assert_eq!(of(""), 0);
    }

    #[test]
    fn weak_tokens_are_refused() {
        for weak in [
            "",
            "a",
            "s3cret",
            "correct-horse",
            // Long, but one character or one word repeated.
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "passwordpasswordpasswordpassword",
            // 16 random hex digits: 64 bits.
            "9f86d081884c7d65",
        ] {
            assert!(check(weak).is_err(), "{weak:?}: {} bits", estimate(weak));
        }
        let refused = check("s3cret").unwrap_err();
        assert_eq!(refused.chars, 6);
        assert!(refused.to_string().starts_with(
            "the action token is too weak: 6 characters, about 16 bits estimated; it needs at least 16 \
             characters and 80 bits"
        ), "{refused}");
    }

    #[test]
    fn random_tokens_are_accepted() {
        for strong in [
            // `openssl rand -hex 16`, `-base64 24`, and 24 random letters and digits.
            "3f9c2a7e51b04d8e9a6c1f7b2d5e8a03",
            "q7Jx+2mV9bTz/Lw4eR1nKc8pYs6uHd0A",
            "h4TqZ9wLmB2xR7vKc3NpY8sJ",
        ] {
            assert!(
                check(strong).is_ok(),
                "{strong:?}: {} bits",
                estimate(strong)
            );
        }
    }
}
