//! Connection strings with their secrets hidden: the one function every message, error and log that
//! shows a database address goes through (docs/operations.md, "Setting up").
//!
//! It reads every form libpq accepts a password in: a URL's user information
//! (`postgres://app:pw@db/prod`), a URL's query parameters (`?password=pw`, `?sslpassword=pw`, with
//! percent-encoded names), and key/value strings (`host=db password='a b'`, quoted and escaped as libpq
//! reads them, including a `dbname` that is itself a connection string). It errs on the side of hiding:
//! a string it cannot read is shown with more hidden, never less.
//!
//! # Example
//!
//! ```
//! use cron_runtime::redact::redact;
//!
//! assert_eq!(redact("postgres://app:pw@db/prod"), "postgres://app:***@db/prod");
//! assert_eq!(redact("postgres://app@db/prod?password=pw"), "postgres://app@db/prod?password=***");
//! assert_eq!(redact("host=db password='a b' dbname=prod"), "host=db password=*** dbname=prod");
//! ```

use std::ops::Range;

/// What a hidden secret is shown as.
pub const HIDDEN: &str = "***";

/// `connection` with every secret it carries replaced by `***`.
pub fn redact(connection: &str) -> String {
    read(connection).text
}

/// `text` (an error message, a log line) with every secret of `connection` replaced by `***`, in the
/// forms `connection` writes it and decoded: for messages of a library that may repeat a part of the
/// connection string. A secret is replaced where it stands alone, not inside a longer word (a password
/// `x` leaves `exist` alone).
pub fn scrub(text: &str, connection: &str) -> String {
    let mut secrets = read(connection).secrets;
    secrets.retain(|s| !s.is_empty());
    // The longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let mut text = text.to_owned();
    for secret in &secrets {
        text = replace_words(&text, secret);
    }
    text
}

/// `text` with each occurrence of `word` that no letter or digit touches replaced by `***`.
fn replace_words(text: &str, word: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, _) in text.match_indices(word) {
        if start < copied {
            continue;
        }
        let end = start + word.len();
        let joined = |c: Option<char>, edge: Option<char>| {
            c.is_some_and(char::is_alphanumeric) && edge.is_some_and(char::is_alphanumeric)
        };
        if joined(text[..start].chars().next_back(), word.chars().next())
            || joined(text[end..].chars().next(), word.chars().next_back())
        {
            continue;
        }
        shown.push_str(&text[copied..start]);
        shown.push_str(HIDDEN);
        copied = end;
    }
    shown.push_str(&text[copied..]);
    shown
}

/// Whether a connection parameter carries a secret: libpq's `password`, `sslpassword` and
/// `oauth_client_secret`, and any other whose name says so, compared without case, `-` and `_` (sqlx
/// spells some parameters `ssl-…`). A path to a key file (`sslkey`) is not a secret.
pub fn is_secret(key: &str) -> bool {
    let key: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .collect::<String>()
        .to_ascii_lowercase();
    ["password", "passwd", "secret", "token"]
        .iter()
        .any(|word| key.contains(word))
}

/// A connection string read: as it is shown, and the secrets it carries (as written, and decoded).
struct Read {
    text: String,
    secrets: Vec<String>,
}

fn read(connection: &str) -> Read {
    match url_scheme_end(connection) {
        Some(end) => read_url(connection, end),
        None => read_key_values(connection),
    }
}

/// Where a URL's `scheme://` ends, when `text` is a URL: a scheme is a letter, then letters, digits,
/// `+`, `-` or `.` (so that `password=a://b` is a key/value string). Leading white space and control
/// characters are skipped, as the URL parser sqlx uses skips them (a URL read from a file or an
/// environment variable with a stray space or newline still connects).
fn url_scheme_end(text: &str) -> Option<usize> {
    let skipped = text.len()
        - text
            .trim_start_matches(|c: char| c.is_whitespace() || c.is_control())
            .len();
    let end = skipped + text[skipped..].find("://")?;
    let scheme = &text[skipped..end];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(end + 3)
}

/// A URL: the password of its user information, and the values of its secret query parameters.
///
/// The user information ends at the last `@` before the path, so that a password with an unencoded `?`,
/// `#` or `@` is hidden whole; and, read the other way, at the last `@` before the query, so that a
/// password with an unencoded `/` is too. What either reading hides is hidden.
fn read_url(url: &str, authority_start: usize) -> Read {
    let rest = &url[authority_start..];
    let path_start = rest.find('/').unwrap_or(rest.len());
    let query_start = rest.find('?').unwrap_or(rest.len());
    let mut hidden: Vec<Range<usize>> = Vec::new();
    let mut host_start = 0;
    for end in [path_start, query_start] {
        if let Some(at) = rest[..end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                hidden.push(authority_start + colon + 1..authority_start + at);
            }
            if end == path_start {
                host_start = at + 1;
            }
        }
    }
    // The query begins at the first `?` after the user information, or at the first `?` at all when
    // that `@` was in fact inside a query value: both are read, and what either hides is hidden.
    let queries = [
        rest.find('?'),
        rest[host_start..].find('?').map(|q| host_start + q),
    ];
    for question in queries.into_iter().flatten() {
        let mut start = authority_start + question + 1;
        for pair in url[start..].split('&') {
            if let Some((key, _)) = pair.split_once('=')
                && is_secret(&percent_decode(key))
            {
                hidden.push(start + key.len() + 1..start + pair.len());
            }
            start += pair.len() + 1;
        }
    }
    let hidden = merge(hidden);
    let mut secrets = Vec::new();
    for range in &hidden {
        let raw = &url[range.clone()];
        secrets.push(raw.to_owned());
        secrets.push(percent_decode(raw));
        secrets.push(percent_decode(&raw.replace('+', " ")));
    }
    Read {
        text: replace(url, &hidden),
        secrets,
    }
}

/// A key/value string as libpq reads it: `key = value` pairs apart by whitespace, a value either quoted
/// (`'a b'`, `\'` and `\\` inside) or running to the next whitespace (`\` escaping the next character).
/// A pair without `=` (which libpq refuses) is skipped, and the pairs after it are read on.
fn read_key_values(text: &str) -> Read {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map_or(text.len(), |(offset, _)| *offset);
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}');
    let mut shown = String::new();
    let mut secrets = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && is_space(chars[i].1) {
            i += 1;
        }
        let key_start = i;
        while i < chars.len() && !is_space(chars[i].1) && chars[i].1 != '=' {
            i += 1;
        }
        let key = &text[at(key_start)..at(i)];
        while i < chars.len() && is_space(chars[i].1) {
            i += 1;
        }
        if i >= chars.len() || chars[i].1 != '=' {
            continue;
        }
        i += 1;
        while i < chars.len() && is_space(chars[i].1) {
            i += 1;
        }
        let value_start = i;
        let mut value = String::new();
        if chars.get(i).is_some_and(|(_, c)| *c == '\'') {
            i += 1;
            while i < chars.len() {
                match chars[i].1 {
                    '\\' if i + 1 < chars.len() => {
                        value.push(chars[i + 1].1);
                        i += 2;
                    }
                    '\'' => {
                        i += 1;
                        break;
                    }
                    c => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < chars.len() && !is_space(chars[i].1) {
                if chars[i].1 == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i].1);
                i += 1;
            }
        }
        let raw = &text[at(value_start)..at(i)];
        let replacement = if is_secret(key) {
            secrets.push(raw.to_owned());
            secrets.push(value);
            HIDDEN.to_owned()
        } else if key == "dbname" && (value.contains('=') || url_scheme_end(&value).is_some()) {
            // libpq reads a `dbname` that is a connection string as one.
            let inner = read(&value);
            if inner.secrets.is_empty() {
                continue;
            }
            secrets.extend(inner.secrets);
            secrets.push(raw.to_owned());
            quote(&inner.text)
        } else {
            continue;
        };
        shown.push_str(&text[copied..at(value_start)]);
        shown.push_str(&replacement);
        copied = at(i);
    }
    shown.push_str(&text[copied..]);
    Read {
        text: shown,
        secrets,
    }
}

/// A value quoted as libpq reads it back.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The ranges in order, those that overlap or touch made one.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

/// `text` with each of the ranges (in order, apart) replaced by `***`.
fn replace(text: &str, hidden: &[Range<usize>]) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut copied = 0;
    for range in hidden {
        shown.push_str(&text[copied..range.start]);
        shown.push_str(HIDDEN);
        copied = range.end;
    }
    shown.push_str(&text[copied..]);
    shown
}

/// `%XX` decoded (an invalid sequence kept as it is; invalid UTF-8 replaced).
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            decoded.push((high * 16 + low) as u8);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{is_secret, redact, scrub};

    #[test]
    fn a_url_hides_the_password_of_its_user_information() {
        assert_eq!(
            redact("postgres://app:s3cr%40t@db:5432/prod?sslmode=require"),
            "postgres://app:***@db:5432/prod?sslmode=require"
        );
        // Unencoded `?`, `#` and `@` in the password: hidden whole.
        assert_eq!(
            redact("postgresql://app:a?b#c@d@db/prod"),
            "postgresql://app:***@db/prod"
        );
        // Several hosts, no path.
        assert_eq!(
            redact("postgres://app:pw@h1:5432,h2:5433"),
            "postgres://app:***@h1:5432,h2:5433"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1/postgres"),
            "postgres://postgres@127.0.0.1/postgres"
        );
    }

    #[test]
    fn a_url_hides_a_password_with_a_slash_or_behind_leading_white_space() {
        assert_eq!(
            redact("postgres://app:pa/ss@db/prod"),
            "postgres://app:***@db/prod"
        );
        assert_eq!(
            redact(" postgres://app:S3cret@db/prod"),
            " postgres://app:***@db/prod"
        );
        assert_eq!(
            redact("\npostgres://app:S3cret@db/prod"),
            "\npostgres://app:***@db/prod"
        );
    }

    #[test]
    fn a_url_hides_its_secret_query_parameters() {
        assert_eq!(
            redact("postgres://app@db/prod?password=S3cret&sslmode=require"),
            "postgres://app@db/prod?password=***&sslmode=require"
        );
        assert_eq!(
            redact("postgres://db?sslmode=verify-full&sslpassword=S3cret&sslkey=/k.pem"),
            "postgres://db?sslmode=verify-full&sslpassword=***&sslkey=/k.pem"
        );
        // Percent-encoded names, odd spellings, both carriers at once.
        assert_eq!(
            redact(
                "postgres://a:S3cret@db/p?pass%77ord=S3cret&ssl-Password=x&oauth_client_secret=y"
            ),
            "postgres://a:***@db/p?pass%77ord=***&ssl-Password=***&oauth_client_secret=***"
        );
        // A value with an unencoded `#` or `@` is hidden whole.
        assert_eq!(
            redact("postgres://db/p?password=a#b@c&user=x"),
            "postgres://db/p?password=***&user=x"
        );
        assert_eq!(
            redact("postgres://db?password=a#b@c&user=x"),
            "postgres://db?password=***&user=x"
        );
        assert_eq!(
            redact("postgres://db/p?password"),
            "postgres://db/p?password"
        );
    }

    #[test]
    fn a_key_value_string_hides_its_secret_values_as_libpq_reads_them() {
        assert_eq!(
            redact("host=db port=5432 user=app password=S3cret dbname=prod"),
            "host=db port=5432 user=app password=*** dbname=prod"
        );
        assert_eq!(
            redact("host=db password = 'S3 c\\'ret' sslpassword=x\\ y dbname=prod"),
            "host=db password = *** sslpassword=*** dbname=prod"
        );
        // An unterminated quote hides the rest.
        assert_eq!(
            redact("host=db password='S3cret dbname=prod"),
            "host=db password=***"
        );
        // A word without `=` does not stop the reading.
        assert_eq!(redact("host db password=S3cret"), "host db password=***");
        // A `dbname` that is a connection string.
        assert_eq!(
            redact("dbname='postgres://app:S3cret@db/prod' connect_timeout=5"),
            "dbname='postgres://app:***@db/prod' connect_timeout=5"
        );
        assert_eq!(
            redact("dbname='host=db password=S3cret'"),
            "dbname='host=db password=***'"
        );
        // Not a URL: `://` inside a value.
        assert_eq!(redact("password=a://b@c host=db"), "password=*** host=db");
        assert_eq!(redact("password=Ünï©ødé host=db"), "password=*** host=db");
        assert_eq!(redact("not a connection string"), "not a connection string");
        assert_eq!(redact(""), "");
    }

    #[test]
    fn scrub_hides_the_secrets_in_a_message_as_written_and_decoded() {
        let url = "postgres://app:p%40ss@db/prod?sslpassword=k+ey";
        assert_eq!(
            scrub("bad password p@ss, p%40ss, k ey and k+ey", url),
            "bad password ***, ***, *** and ***"
        );
        assert_eq!(
            scrub("key 'a b' refused", "host=db password='a b'"),
            "key *** refused"
        );
        assert_eq!(
            scrub("nothing to hide", "postgres://db/prod"),
            "nothing to hide"
        );
        assert_eq!(
            scrub("database \"x\" does not exist: x", "postgres://a:x@db/x"),
            "database \"***\" does not exist: ***"
        );
    }

    #[test]
    fn secret_parameters_are_recognized_by_name() {
        for key in [
            "password",
            "sslpassword",
            "ssl-password",
            "PASSWORD",
            "oauth_client_secret",
        ] {
            assert!(is_secret(key), "{key}");
        }
        for key in ["sslkey", "sslcert", "user", "host", "passfile", "dbname"] {
            assert!(!is_secret(key), "{key}");
        }
    }
}
