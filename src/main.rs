//! The `hookq` binary: parse the command line ([`hookq::cli`]), then either run an operator
//! command or set up logging and run the server until a signal.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use hookq::Server;
use hookq::cli::{Cli, Command};
use hookq::config::{Config, ServeArgs};

/// mimalloc instead of the system allocator: a request allocates and frees many small
/// buffers across threads (parsed headers, payload strings, futures), and glibc's arenas spent
/// ~15% of the server's CPU on them in the end-to-end profile (docs/benchmarks.md). SQLite's
/// own allocations go to mimalloc too (`sqlite_heap`, installed as the store opens).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(args)) => *args,
        None => cli.serve,
        Some(operator_command) => {
            // The operator commands print their own results; logs only for warnings.
            init_tracing("warn");
            return hookq::cli::run(operator_command);
        }
    };
    init_tracing("info");
    let served = serve(args);
    hookq::otel::shutdown();
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // Each cause once: PostgreSQL's errors repeat their source in their own text.
            let text = hookq::humanize::error_chain(err.as_ref());
            tracing::error!("{text}");
            eprintln!("hookq: {text}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = Config::from_args(args)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let server = Server::build(config, listener).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(watch_signals(shutdown.clone()));
    server.run(shutdown).await
}

/// The first SIGINT/SIGTERM starts a graceful shutdown; a second one exits at once
/// (leases make that safe: interrupted jobs are delivered again after restart).
async fn watch_signals(shutdown: CancellationToken) {
    wait_for_signal().await;
    tracing::info!("signal received; shutting down gracefully (send again to exit now)");
    shutdown.cancel();
    wait_for_signal().await;
    tracing::warn!("second signal; exiting now");
    std::process::exit(130);
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `HOOKQ_LOG` sets the filter (default: `info` serving, `warn` for operator commands);
/// `HOOKQ_LOG_FORMAT=json` logs JSON lines. With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans
/// are exported over OTLP too ([`hookq::otel`]).
fn init_tracing(default: &str) {
    let filter = EnvFilter::try_from_env("HOOKQ_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let json = std::env::var("HOOKQ_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    // Colours only for a person at a terminal: log files and journals get plain text.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let logs = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let (export, export_error) = match hookq::otel::layer_from_env() {
        Ok(layer) => (layer, None),
        Err(err) => (None, Some(err)),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(export)
        .init();
    if let Some(err) = export_error {
        tracing::error!("OpenTelemetry export off: {err:#}");
    }
}
