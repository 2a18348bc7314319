//! The counting proxy: forwards a replica's connections to PostgreSQL and counts, per statement text,
//! the statements the replica sends (`Execute` and `Query` messages) and its round trips (`Sync` and
//! `Query`). Plain threads: the rates it is used at are low.
//!
//! Statements are told apart by their first words, and those of the heartbeat and lease renewal marked.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use crate::AnyResult;
use crate::url::{through_proxy, upstream_of};

#[derive(Debug, Default, Clone)]
pub(crate) struct Counts {
    pub(crate) statements: u64,
    pub(crate) round_trips: u64,
    kinds: HashMap<String, u64>,
}

impl Counts {
    /// The sum of two proxies' counts.
    pub(crate) fn plus(mut self, other: &Counts) -> Counts {
        self.statements += other.statements;
        self.round_trips += other.round_trips;
        for (kind, n) in &other.kinds {
            *self.kinds.entry(kind.clone()).or_default() += n;
        }
        self
    }

    pub(crate) fn minus_kinds(&self, before: &Counts) -> Vec<(String, u64)> {
        let mut kinds: Vec<(String, u64)> = self
            .kinds
            .iter()
            .map(|(k, n)| (k.clone(), n - before.kinds.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        kinds
    }
}

pub(crate) struct Proxy {
    pub(crate) url: String,
    counts: Arc<Mutex<Counts>>,
}

impl Proxy {
    pub(crate) fn start(url: &str) -> AnyResult<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let upstream = upstream_of(url);
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = Arc::clone(&counts);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(mut client_read), Ok(mut server_write)) =
                    (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let (mut server_read, mut client_write) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_read, &mut client_write);
                    let _ = client_write.shutdown(std::net::Shutdown::Both);
                });
                let counts = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut parser = Parser::default();
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match client_read.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if server_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        parser.feed(&buf[..n], &counts);
                    }
                    let _ = server_write.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Ok(Proxy {
            url: through_proxy(url, port),
            counts,
        })
    }

    pub(crate) fn snapshot(&self) -> Counts {
        self.counts.lock().unwrap().clone()
    }
}

/// The frontend side of the PostgreSQL protocol, as much as counting needs.
#[derive(Default)]
struct Parser {
    pending: Vec<u8>,
    started: bool,
    /// Prepared statement name → its text.
    statements: HashMap<String, String>,
    /// The text of the statement bound last.
    bound: String,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8], counts: &Mutex<Counts>) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            let rest = &self.pending[at..];
            if !self.started {
                // Startup-phase messages have no type byte: a length, then a code.
                if rest.len() < 8 {
                    break;
                }
                let len = u32::from_be_bytes(rest[0..4].try_into().unwrap()) as usize;
                if rest.len() < len {
                    break;
                }
                let code = u32::from_be_bytes(rest[4..8].try_into().unwrap());
                if code == 196_608 {
                    self.started = true;
                }
                at += len;
                continue;
            }
            if rest.len() < 5 {
                break;
            }
            let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
            if rest.len() < 1 + len {
                break;
            }
            let kind = rest[0];
            let body = &rest[5..1 + len];
            let mut counts = counts.lock().unwrap();
            match kind {
                b'P' => {
                    let mut parts = body.split(|b| *b == 0);
                    let name =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    let text =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    self.statements.insert(name, text);
                }
                b'B' => {
                    let mut parts = body.split(|b| *b == 0);
                    let _portal = parts.next();
                    let name =
                        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
                    self.bound = self.statements.get(&name).cloned().unwrap_or_default();
                }
                b'E' => {
                    counts.statements += 1;
                    *counts.kinds.entry(kind_of(&self.bound)).or_default() += 1;
                }
                b'Q' => {
                    let text =
                        String::from_utf8_lossy(body.split(|b| *b == 0).next().unwrap_or_default());
                    counts.statements += 1;
                    counts.round_trips += 1;
                    *counts.kinds.entry(kind_of(&text)).or_default() += 1;
                }
                b'S' => counts.round_trips += 1,
                _ => {}
            }
            drop(counts);
            at += 1 + len;
        }
        self.pending.drain(..at);
    }
}

/// A statement's first words, whitespace collapsed: enough to tell the store's statements apart.
fn kind_of(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut kind = words.join(" ");
    if kind.starts_with("WITH regular AS") {
        return "CLAIM_DUE (WITH regular AS … FOR UPDATE OF j SKIP LOCKED …)".to_owned();
    }
    if kind.starts_with("WITH due AS") {
        return "CLAIM_RUNS (WITH due AS (SELECT * FROM unnest(…)) … INSERT … UPDATE …)".to_owned();
    }
    if kind.starts_with("SELECT clock_timestamp() AS clock, least(") {
        return "NEXT_DUE (SELECT clock_timestamp() AS clock, least(…))".to_owned();
    }
    if kind.starts_with("SELECT ( SELECT d.id") {
        return "ELECTED (SELECT (SELECT d.id … live replica …)".to_owned();
    }
    if kind.starts_with("SELECT j.id, j.deployment_id") && kind.contains("lease_expires_at < now()")
    {
        return "EXPIRED (SELECT … WHERE j.state = 'executing' AND j.lease_expires_at < now() …)"
            .to_owned();
    }
    if kind.len() > 90 {
        let mut cut = 90;
        while !kind.is_char_boundary(cut) {
            cut -= 1;
        }
        kind.truncate(cut);
        kind.push_str(" …");
    }
    kind
}

/// Statements of the heartbeat and lease renewal (`Store::heartbeat`, `Store::renew`). `BEGIN` and
/// `COMMIT` are attributed by [`heartbeat_statements`]: those of the recovery transaction are the
/// heartbeat's.
fn is_heartbeat(kind: &str) -> bool {
    kind.starts_with("INSERT INTO cron_runners")
        || kind.starts_with("DELETE FROM cron_runners WHERE last_seen")
        || kind.starts_with("SELECT id, verb, schedule, timezone")
        // Recovery reads its rows' deployments' `active` after locking them.
        || kind.starts_with("SELECT id FROM cron_deployments WHERE id = ANY")
        || kind.starts_with("ELECTED")
        || kind.starts_with("EXPIRED")
        || kind.starts_with("UPDATE cron_jobs j SET lease_expires_at")
}

/// The heartbeat's and renewals' statements among these: their own, and the `BEGIN` and `COMMIT` of each
/// recovery transaction (one per `EXPIRED`).
pub(crate) fn heartbeat_statements(kinds: &[(String, u64)]) -> u64 {
    let own: u64 = kinds
        .iter()
        .filter(|(k, _)| is_heartbeat(k))
        .map(|(_, n)| *n)
        .sum();
    let recoveries: u64 = kinds
        .iter()
        .filter(|(k, _)| k.starts_with("EXPIRED"))
        .map(|(_, n)| *n)
        .sum();
    own + 2 * recoveries
}

pub(crate) fn statement_kinds(before: &Counts, after: &Counts, per: f64) -> String {
    let mut table = String::from("| statement | count |\n|---|---:|\n");
    for (kind, n) in after.minus_kinds(before) {
        let mark = if is_heartbeat(&kind) { " `*`" } else { "" };
        table.push_str(&format!(
            "| `{}`{mark} | {:.2} |\n",
            kind.replace('|', "\\|"),
            n as f64 / per.max(1e-9)
        ));
    }
    table
}
