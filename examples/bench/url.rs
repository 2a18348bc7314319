//! Database URLs: the bench's fresh databases, and the counting proxy in front of PostgreSQL.

/// The URL with another database name.
pub(crate) fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority_start..]
        .find('/')
        .map(|i| authority_start + i);
    let base = path.map_or(base, |p| &base[..p]);
    format!("{base}/{name}{query}")
}

/// The URL pointing at `127.0.0.1:port` without TLS, for the counting proxy.
pub(crate) fn through_proxy(url: &str, port: u16) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let user = authority.rfind('@').map_or("", |at| &authority[..=at]);
    let tail = &rest[authority_end..];
    let separator = if tail.contains('?') { '&' } else { '?' };
    format!(
        "{}{user}127.0.0.1:{port}{tail}{separator}sslmode=disable",
        &url[..scheme_end]
    )
}

/// The upstream address of a URL (host and port).
pub(crate) fn upstream_of(url: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host_port = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    let host_port = if host_port.is_empty() {
        "127.0.0.1"
    } else {
        host_port
    };
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    }
}
