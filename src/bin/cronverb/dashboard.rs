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
    /// Enable pause, resume and trigger for whoever enters this token, once per browser session; at
    /// least 16 characters and 80 bits estimated, e.g. `openssl rand -hex 16` [default: read-only]
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
    // A weak token is refused before anything starts (docs/dashboard.md, "The action token").
    let dashboard_token = match allow_actions {
        None => None,
        Some(token) => match cronverb::dashboard::Dashboard::check_action_token(&token) {
            Ok(()) => Some(token),
            Err(weak) => {
                eprintln!("error: `--allow-actions`: {weak}");
                return ExitCode::from(2);
            }
        },
    };
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
        let actions = dashboard_token.is_some();
        if let Some(token) = dashboard_token {
            dashboard = dashboard
                .action_token(token)
                .map_err(|weak| Failure::Other(weak.to_string()))?;
        }
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| Failure::Other(format!("while listening on {listen}: {error}")))?;
        let local = listener.local_addr().unwrap_or(listen);
        eprintln!(
            "dashboard at http://{local}/ ({})",
            if actions {
                "actions need the token, entered once per browser session"
            } else {
                "read-only"
            }
        );
        // A connection that does not send its request's headers within the timeout is closed.
        cronverb::dashboard::serve(
            listener,
            dashboard.router(),
            cronverb::dashboard::HEADER_READ_TIMEOUT,
            async {
                let _ = tokio::signal::ctrl_c().await;
            },
        )
        .await
        .map_err(|error| Failure::Other(format!("while serving the dashboard: {error}")))
    })
}
