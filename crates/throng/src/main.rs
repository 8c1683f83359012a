//! `throng`: the one binary. `throng serve` runs the Icecast-compatible server (on embedded
//! defaults with no arguments: `127.0.0.1:8000` and a demo mount `/demo.mp3`); `throng bench`
//! runs the load generator that checks every simulated listener really receives audio.
//! `throng serve --icecast-config icecast.xml` runs on an Icecast configuration as it is, and
//! `throng import-icecast icecast.xml` prints the equivalent TOML. The hidden `throng manpage`
//! and `throng completions SHELL` generate the man pages and shell completions.

use std::path::Path;

use anyhow::Context as _;
use clap::{CommandFactory, Parser};
use throng_server::config::icecast_xml::{self, Unsupported};
use throng_server::config::Logging;
use throng_server::{Config, ErrorLog, Server};

mod cli;
use cli::{Cli, Command, ServeArgs};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => throng_bench::run(args),
        Command::ImportIcecast(args) => import_icecast(&args.file),
        Command::Manpage(args) => manpage(&args.out),
        Command::Completions(args) => {
            let mut cmd = Cli::command();
            clap_complete::generate(args.shell, &mut cmd, "throng", &mut std::io::stdout());
            Ok(())
        }
    }
}

/// `throng manpage --out DIR`: throng.1 and one page per visible subcommand, from the clap
/// definitions in `cli.rs`.
fn manpage(out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    clap_mangen::generate_to(Cli::command(), out)
        .with_context(|| format!("cannot write the man pages to {}", out.display()))
}

/// `throng import-icecast`: the TOML on stdout, headed by the unsupported list as comments.
fn import_icecast(file: &Path) -> anyhow::Result<()> {
    let import = icecast_xml::from_file(file)
        .with_context(|| format!("cannot import {}", file.display()))?;
    let toml = import.config.to_toml()?;
    let mut out = format!(
        "# Throng configuration imported from {} by `throng import-icecast`.\n",
        file.display()
    );
    if !import.unsupported.is_empty() {
        out.push_str("#\n# Not carried over:\n");
        for u in &import.unsupported {
            out.push_str(&format!(
                "#   {}\n",
                u.to_string().replace(['\n', '\r'], " ")
            ));
        }
    }
    out.push('\n');
    out.push_str(&toml);
    print!("{out}");
    warn_unsupported(file, &import.unsupported);
    Ok(())
}

/// Prints each unsupported element of an imported icecast.xml on stderr.
fn warn_unsupported(file: &Path, unsupported: &[Unsupported]) {
    for u in unsupported {
        eprintln!("throng: warning: {}: {u}", file.display());
    }
}

/// Sends diagnostics to `[logging] error-log` (standard error for `-` or empty) at
/// `--log`/`THRONG_LOG`, else `[logging] level`. Returns whether they go to a file; a file is
/// the process's [`ErrorLog`], which SIGUSR1 reopens at its path.
fn init_logging(filter: Option<&str>, logging: &Logging) -> anyhow::Result<bool> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let filter = filter.unwrap_or(&logging.level);
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .with_context(|| format!("invalid log level or filter {filter:?}"))?;
    let to_file = !matches!(logging.error_log.as_str(), "" | "-");
    let (writer, ansi) = if to_file {
        // Reopenable at its path on SIGUSR1 (`throng_server::error_log::reopen`).
        let log = ErrorLog::install(&logging.error_log)?;
        (BoxMakeWriter::new(move || log.clone()), false)
    } else {
        (
            BoxMakeWriter::new(std::io::stderr),
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi)
        .init();
    Ok(to_file)
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Started by a binary upgrade (SIGUSR2) of a running server: take over its sockets. Read
    // while the process has one thread (it edits the environment).
    let handover = throng_server::Handover::from_env();
    let mut config = match (&args.config, &args.icecast_config) {
        (Some(path), _) => Config::from_file(path)?,
        (None, Some(path)) => {
            let import = icecast_xml::from_file(path)
                .with_context(|| format!("cannot import {}", path.display()))?;
            warn_unsupported(path, &import.unsupported);
            if init_logging(args.log.as_deref(), &import.config.logging)? {
                for u in &import.unsupported {
                    tracing::warn!("{}: {u}", path.display());
                }
            }
            import.config
        }
        (None, None) => Config::embedded(),
    };
    if args.icecast_config.is_none() {
        init_logging(args.log.as_deref(), &config.logging)?;
    }
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
        let server = match handover {
            Some(mut handover) => {
                handover
                    .hello()
                    .context("upgrade: the old process is gone")?;
                Server::adopt(config, handover).await?
            }
            None => Server::bind(config).await?,
        };
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
        server
            .run_with_signals()
            .await
            .context("cannot install the signal handlers")?;
        anyhow::Ok(())
    })?;
    Ok(())
}
