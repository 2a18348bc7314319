//! examples/webhook.rs posts each event to a webhook: a local HTTP server receives the `failed` event
//! of a job that fails, as JSON.

#[path = "../examples/webhook.rs"]
#[allow(dead_code)]
mod webhook;

use std::time::Duration;

use axum::Router;
use axum::routing::post;
use cronverb::{MemoryStore, Runtime};
use tokio::sync::mpsc;

#[tokio::test]
async fn the_example_posts_a_failed_event_as_json_to_the_webhook() {
    let (bodies, mut received) = mpsc::unbounded_channel::<String>();
    let app = Router::new().route(
        "/hook",
        post(move |body: String| {
            let bodies = bodies.clone();
            async move {
                let _ = bodies.send(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let runtime = Runtime::builder()
        .module("hooks")
        .registered_jobs(false)
        .memory_store(MemoryStore::new())
        .job("hooks::flaky", "* * * * * *", || async {
            Err::<(), _>("the upstream service answered 503")
        })
        .on_event(webhook::webhook(format!("http://{address}/hook")))
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let body = tokio::time::timeout(Duration::from_secs(10), received.recv())
        .await
        .expect("the hook heard nothing within 10 s")
        .unwrap();
    handle.shutdown().await.unwrap();

    let event: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(event["kind"], "failed", "{event}");
    assert_eq!(event["module"], "hooks");
    assert_eq!(event["verb"], "hooks::flaky");
    assert_eq!(event["error"], "the upstream service answered 503");
    assert_eq!(event["attempt"], 1);
    let at = event["scheduled_at"].as_str().unwrap();
    assert!(
        event["text"].as_str().unwrap().starts_with(&format!(
            "failed: `hooks::flaky` (module hooks) at {at}, attempt 1:"
        )),
        "{event}"
    );
}
