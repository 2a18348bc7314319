//! Posts each event the runtime raises (docs/operations.md, "Notifications") as JSON to a webhook: a
//! chat channel's incoming webhook, an alert manager, a paging service.
//!
//! ```text
//! WEBHOOK_URL=http://127.0.0.1:9000/hook cargo run --example webhook
//! ```
//!
//! The job `webhook::flaky` fails every 10 seconds and is expected to succeed within 15 seconds of its
//! instant, so the hook hears `failed` and then `overdue`. Each body is one JSON object:
//!
//! ```json
//! { "kind": "failed", "module": "webhook", "verb": "webhook::flaky",
//!   "scheduled_at": "2026-03-08T02:00:10Z", "text": "failed: `webhook::flaky` (module webhook) at …",
//!   "error": "the upstream service answered 503", "attempt": 1 }
//! ```
//!
//! Listeners run on a thread of their own, so this one posts with a blocking connection and a short
//! timeout, over plain HTTP (put a TLS-terminating proxy in front of an `https://` hook); a hook that
//! does not answer delays only the events after it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use cronverb::{Event, cron};

/// How long a post may take to connect, and to be answered.
const TIMEOUT: Duration = Duration::from_secs(5);

#[cron("*/10 * * * * *", expect_within = "15s")]
async fn flaky() -> anyhow::Result<()> {
    anyhow::bail!("the upstream service answered 503")
}

/// The event as the hook receives it.
pub fn event_json(event: &Event) -> serde_json::Value {
    let mut json = serde_json::json!({
        "kind": event.kind().to_string(),
        "module": event.module(),
        "verb": event.verb(),
        "scheduled_at": event.scheduled_at().to_rfc3339_opts(cronverb::chrono::SecondsFormat::AutoSi, true),
        "text": event.to_string(),
    });
    if let Some(error) = event.error() {
        json["error"] = error.into();
    }
    if event.attempt() > 0 {
        json["attempt"] = event.attempt().into();
    }
    if let Some(reason) = event.skip_reason() {
        json["skipped"] = event.skipped().into();
        json["reason"] = reason.to_string().into();
    }
    if let Some(within) = event.expect_within() {
        json["expect_within_secs"] = within.as_secs().into();
    }
    json
}

/// Posts `body` as JSON to `url` (`http://host[:port][/path]`); the status code the hook answered.
pub fn post(url: &str, body: &str) -> std::io::Result<u16> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, what.to_owned());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("WEBHOOK_URL must start with http://"))?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(host, path)| {
            (host, format!("/{path}"))
        });
    let address = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:80")
    };
    let address = std::net::ToSocketAddrs::to_socket_addrs(&address)?
        .next()
        .ok_or_else(|| invalid("WEBHOOK_URL's host has no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("the hook's answer is not HTTP"))
}

/// A listener that posts each event to `url`, logging a post that fails.
pub fn webhook(url: String) -> impl Fn(&Event) + Send + Sync + 'static {
    move |event: &Event| {
        let body = event_json(event).to_string();
        match post(&url, &body) {
            Ok(code) if (200..300).contains(&code) => {}
            Ok(code) => tracing::warn!(code, "the webhook refused an event"),
            Err(error) => tracing::warn!(%error, "posting an event to the webhook failed"),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The schema of this build, as `cronverb schema extract` reads it from the source.
    if std::env::args().any(|arg| arg == "--emit-schema") {
        print!("{}", cronverb::schema().to_json());
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let url = std::env::var("WEBHOOK_URL")
        .map_err(|_| anyhow::anyhow!("set WEBHOOK_URL, such as http://127.0.0.1:9000/hook"))?;
    let mut builder = cronverb::Runtime::builder()
        .module("webhook")
        .on_event(webhook(url));
    if let Ok(url) = std::env::var("DATABASE_URL") {
        builder = builder.database_url(url);
    }
    builder.build().await?.run().await?;
    Ok(())
}
