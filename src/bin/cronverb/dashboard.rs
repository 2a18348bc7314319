//! `cronverb dashboard`: serves the dashboard (docs/dashboard.md) for operators who do not embed it.

use std::net::SocketAddr;
use std::process::ExitCode;

use cronverb::dashboard::Dashboard;

use crate::db::{self, Connection, Failure};

/// Serve the dashboard: modules, deployments, jobs and their history, as web pages
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Enable pause, resume and trigger for whoever gives this token in the action's form
    /// [default: read-only]
    #[arg(
        long,
        value_name = "TOKEN",
        env = "CRONVERB_ACTION_TOKEN",
        hide_env_values = true
    )]
    allow_actions: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

pub fn run(args: Args) -> ExitCode {
    let Args {
        listen,
        allow_actions,
        connection,
    } = args;
    if allow_actions
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        eprintln!("error: `--allow-actions` needs a token that is not empty");
        return ExitCode::from(2);
    }
    // Every action is logged (docs/dashboard.md, "Security model"), on standard error; `RUST_LOG`
    // chooses what else. The other messages stay off, as in the other database commands.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("cronverb::dashboard=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    db::run(&connection, |store| async move {
        let mut dashboard = Dashboard::new(store.admin());
        let actions = allow_actions.is_some();
        if let Some(token) = allow_actions {
            dashboard = dashboard.action_token(token);
        }
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| Failure::Other(format!("while listening on {listen}: {error}")))?;
        let local = listener.local_addr().unwrap_or(listen);
        eprintln!(
            "dashboard at http://{local}/ ({})",
            if actions {
                "actions need the token"
            } else {
                "read-only"
            }
        );
        axum::serve(listener, dashboard.router())
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|error| Failure::Other(format!("while serving the dashboard: {error}")))
    })
}
