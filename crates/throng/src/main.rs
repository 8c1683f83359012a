//! `throng`: the one binary. `throng serve` runs the Icecast-compatible server (on embedded
//! defaults with no arguments: `127.0.0.1:8000` and a demo mount `/demo.mp3`); `throng bench`
//! runs the load generator that checks every simulated listener really receives audio.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use throng_server::{Config, Server};

/// Throng: one live stream to a very large crowd of listeners.
#[derive(Debug, Parser)]
#[command(name = "throng", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the streaming server (Icecast-compatible).
    Serve(ServeArgs),
    /// Run the load generator against any Icecast-compatible server.
    Bench(throng_bench::BenchArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see throng.example.toml); without it, embedded defaults with the
    /// demo mount.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Listen address (replaces every `listen` of the file), e.g. 0.0.0.0:8000.
    #[arg(long)]
    listen: Vec<SocketAddr>,
    /// Source password (user `source`), overriding the file.
    #[arg(long)]
    source_password: Option<String>,
    /// Admin password (user `admin`), overriding the file.
    #[arg(long)]
    admin_password: Option<String>,
    /// Log filter for stderr (tracing's EnvFilter syntax), e.g. `debug` or `throng_server=debug`.
    #[arg(long, default_value = "info", env = "THRONG_LOG")]
    log: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => throng_bench::run(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.log))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded(),
    };
    if !args.listen.is_empty() {
        config.listen = args.listen.clone();
    }
    if let Some(p) = args.source_password {
        config.authentication.source_password = Some(p);
    }
    if let Some(p) = args.admin_password {
        config.authentication.admin_password = Some(p);
    }
    for (what, password) in config.generate_missing_passwords() {
        eprintln!("throng: generated {what}: {password}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("throng-io")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let server = Server::bind(config).await?;
        for addr in server.local_addrs() {
            eprintln!("throng: serving on http://{addr}/");
        }
        if server.ctx().config.demo {
            let addr = server.local_addrs()[0];
            eprintln!(
                "throng: demo mount playing at http://{addr}{}",
                server.ctx().config.demo_mount
            );
        }
        server.run(shutdown_signal()).await;
        anyhow::Ok(())
    })?;
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
