//! `throng`: the one binary. `throng serve` runs the Icecast-compatible server (on embedded
//! defaults with no arguments: `127.0.0.1:8000` and a demo mount `/demo.mp3`); `throng bench`
//! runs the load generator that checks every simulated listener really receives audio.
//! `throng serve --icecast-config icecast.xml` runs on an Icecast configuration as it is, and
//! `throng import-icecast icecast.xml` prints the equivalent TOML; Icecast's own command line
//! (`icecast [-b] -c icecast.xml`, `icecast -v`) is taken when the binary is invoked as
//! `icecast` or `icecast2` (a symlink), or as `throng icecast`, and writes the `<pidfile>` while it
//! runs (`pidfile.rs`). `throng check-config` checks a
//! configuration as a start would. The configuration is loaded through a `ConfigSource`, which
//! the server keeps to load it again on SIGHUP or admin `reloadconfig`. `throng report` prints
//! the audience ledger's reports from its database, with no server running. The hidden
//! `throng manpage` and `throng completions SHELL` generate the man pages and shell completions.

use std::path::Path;

use anyhow::Context as _;
use clap::{CommandFactory, Parser};
use throng_server::config::check::check;
use throng_server::config::icecast_xml::{self, Unsupported};
use throng_server::config::source::{ConfigFile, ConfigSource, Overrides};
use throng_server::config::Logging;
use throng_server::{ErrorLog, Server};

mod cli;
mod pidfile;
use cli::{CheckArgs, Cli, Command, IcecastArgs, ReportArgs, ServeArgs};

/// Names under which the binary takes Icecast's command line (`argv[0]`'s file name).
const ICECAST_NAMES: [&str; 2] = ["icecast", "icecast2"];

fn main() -> anyhow::Result<()> {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let invoked_as = Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if ICECAST_NAMES.contains(&invoked_as) {
        return icecast(IcecastArgs::parse());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Icecast(args) => icecast(args),
        Command::Serve(args) => serve(args),
        Command::CheckConfig(args) => check_config(args),
        Command::Bench(args) => throng_bench::run(args),
        Command::ImportIcecast(args) => import_icecast(&args.file),
        Command::Report(args) => report(args),
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
    for w in throng_server::config::default_passwords::warnings(&import.config) {
        eprintln!("throng: warning: {}: {w}", file.display());
    }
    Ok(())
}

/// Prints each unsupported element of an imported icecast.xml that warns on stderr (those
/// accepted without a warning are only in the TOML's comments).
fn warn_unsupported(file: &Path, unsupported: &[Unsupported]) {
    for u in unsupported.iter().filter(|u| u.warns()) {
        eprintln!("throng: warning: {}: {u}", file.display());
    }
}

/// The configuration file named by `-c` or `--icecast-config`.
fn config_file(toml: &Option<std::path::PathBuf>, xml: &Option<std::path::PathBuf>) -> ConfigFile {
    match (toml, xml) {
        (Some(p), _) => ConfigFile::Toml(p.clone()),
        (None, Some(p)) => ConfigFile::IcecastXml(p.clone()),
        (None, None) => ConfigFile::Embedded,
    }
}

/// `throng check-config`: every problem on standard output with its key; exit 1 on any.
fn check_config(args: CheckArgs) -> anyhow::Result<()> {
    let source = ConfigSource::new(
        config_file(&args.config, &args.icecast_config),
        Overrides::default(),
        None,
    );
    let problems = match source.read() {
        Err(e) => vec![e.to_string()],
        Ok((config, warnings)) => {
            for w in warnings {
                eprintln!("throng: warning: {w}");
            }
            let mut p: Vec<String> = check(&config).iter().map(ToString::to_string).collect();
            p.extend(throng_server::auth_problems(&config));
            p
        }
    };
    if problems.is_empty() {
        println!("{}: configuration OK", source.file);
        return Ok(());
    }
    for p in &problems {
        println!("{}: {p}", source.file);
    }
    eprintln!("throng: {} problem(s) in {}", problems.len(), source.file);
    std::process::exit(1);
}

/// Sends diagnostics to `[logging] error-log` (standard error for `-` or empty) at
/// `--log`/`THRONG_LOG`, else `[logging] level`. Returns whether they go to a file (a file is
/// the process's [`ErrorLog`], which SIGUSR1 reopens at its path), and the
/// hook through which a reload applies a new `[logging] level` (refused while `--log` or
/// `THRONG_LOG` sets the level).
fn init_logging(
    filter: Option<&str>,
    logging: &Logging,
) -> anyhow::Result<(bool, throng_server::LogHook)> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let fixed = filter.is_some();
    let filter = filter.unwrap_or(&logging.level);
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .with_context(|| format!("invalid log level or filter {filter:?}"))?;
    let to_file = !matches!(logging.error_log.as_str(), "" | "-");
    let (writer, ansi) = if to_file {
        // Reopenable at its path on SIGUSR1 (`throng_server::error_log::reopen`).
        let log = ErrorLog::install(&logging.error_log)?;
        log.set_rotation(throng_server::Rotation::from_logging(logging));
        (BoxMakeWriter::new(move || log.clone()), false)
    } else {
        (
            BoxMakeWriter::new(std::io::stderr),
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
    };
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(ansi),
        )
        .init();
    let hook: throng_server::LogHook = Box::new(move |l: &Logging| {
        if fixed {
            return Err("--log or THRONG_LOG sets the level".into());
        }
        let f = tracing_subscriber::EnvFilter::try_new(&l.level)
            .map_err(|e| format!("invalid log level or filter {:?}: {e}", l.level))?;
        handle.reload(f).map_err(|e| e.to_string())
    });
    Ok((to_file, hook))
}

/// Icecast's command line: `-v` prints the version; otherwise the icecast.xml of `-c` is served
/// as `throng serve --icecast-config FILE` serves it, in the background with `-b` (as Icecast
/// 2.4.4 `main.c`: the parent says so and exits 0, the child starts a new session with its
/// standard streams on `/dev/null`).
fn icecast(args: IcecastArgs) -> anyhow::Result<()> {
    if args.version {
        println!(
            "Throng {} (Icecast 2.4.4 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(());
    }
    let Some(config) = args.config else {
        anyhow::bail!("usage: icecast [-b] -c <file>");
    };
    // Read it once in the foreground, so a broken file is reported on the console.
    icecast_xml::from_file(&config)
        .with_context(|| format!("cannot start on {}", config.display()))?;
    if args.background {
        background().context("cannot detach from the console")?;
    }
    serve(ServeArgs {
        icecast_config: Some(config),
        state_dir: args.state_dir,
        log: args.log,
        ..ServeArgs::default()
    })
}

/// Forks: the parent prints the child's pid and exits 0; the child starts a new session with
/// standard input, output and error on `/dev/null`. Called while the process has one thread.
fn background() -> anyhow::Result<()> {
    use nix::unistd::{dup2, fork, setsid, ForkResult};
    use std::os::fd::AsRawFd as _;
    // SAFETY: no other thread exists yet (the runtime starts later), so the child may do
    // anything.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            println!("throng: detaching from the console (pid {child})");
            std::process::exit(0);
        }
        ForkResult::Child => {
            setsid()?;
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?;
            for fd in 0..=2 {
                dup2(null.as_raw_fd(), fd)?;
            }
            Ok(())
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Started by a binary upgrade (SIGUSR2) of a running server: take over its sockets. Read
    // while the process has one thread (it edits the environment).
    let handover = throng_server::Handover::from_env();
    let mut source = ConfigSource::new(
        config_file(&args.config, &args.icecast_config),
        Overrides {
            listen: args.listen.clone(),
            source_password: args.source_password.clone(),
            admin_password: args.admin_password.clone(),
            tls_listen: args.tls_listen.clone(),
            tls_cert: args.tls_cert.clone(),
            tls_key: args.tls_key.clone(),
            public_url: args.public_url.clone(),
            cluster_secret: args.cluster_secret.clone(),
            ledger_database: args.ledger_database.clone(),
            webrtc_public_address: args.webrtc_public_address,
        },
        args.state_dir.clone(),
    );
    let loaded = source
        .load()
        .with_context(|| format!("cannot start on {}", source.file))?;
    for w in &loaded.warnings {
        eprintln!("throng: warning: {w}");
    }
    let (to_file, log_hook) = init_logging(args.log.as_deref(), &loaded.config.logging)?;
    if to_file {
        for w in &loaded.warnings {
            tracing::warn!("{w}");
        }
    }
    for (what, password) in &loaded.generated {
        eprintln!("throng: generated {what}: {password}");
    }
    if let Some(file) = &loaded.state_file {
        if loaded.generated.is_empty() {
            eprintln!(
                "throng: passwords the configuration leaves out come from {}",
                file.display()
            );
        } else {
            eprintln!("throng: generated passwords are kept in {}", file.display());
        }
    }
    let config = loaded.config;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("throng-io")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut server = match handover {
            Some(mut handover) => {
                handover
                    .hello()
                    .context("upgrade: the old process is gone")?;
                Server::adopt(config, Some(source), handover).await?
            }
            None => {
                let server = Server::bind_source(config, source).await?;
                // Before "serving on": a HUP sent once that is printed must reload, not kill.
                server
                    .install_signals()
                    .context("cannot install the signal handlers")?;
                server
            }
        };
        server.set_log_hook(log_hook);
        // Removed when it goes out of scope, after the server stopped.
        let _pidfile = server
            .ctx()
            .config()
            .paths
            .pidfile
            .as_deref()
            .map(pidfile::PidFile::write)
            .transpose()?;
        for addr in server.local_addrs() {
            eprintln!("throng: serving on http://{addr}/");
        }
        for addr in server.tls_addrs() {
            eprintln!("throng: serving on https://{addr}/");
        }
        let config = server.ctx().config();
        if config.demo {
            let addr = server.local_addrs()[0];
            eprintln!(
                "throng: demo mount playing at http://{addr}{}",
                config.demo_mount
            );
        }
        server.run(std::future::pending()).await;
        anyhow::Ok(())
    })?;
    Ok(())
}

/// `throng report NAME`: the report on standard output, read from the ledger's database (the
/// configuration's `[ledger] database`, its default in the state directory, or --database),
/// which is named on standard error. A database with no ledger exits 2 ("no audience ledger
/// at …") and creates nothing.
fn report(args: ReportArgs) -> anyhow::Result<()> {
    let source = ConfigSource::new(
        config_file(&args.config, &args.icecast_config),
        Overrides::default(),
        args.state_dir.clone(),
    );
    let (mut config, _warnings) = source.read().context("cannot read the configuration")?;
    if let Some(db) = &args.database {
        config.ledger.database = Some(db.clone());
    }
    source.default_ledger(&mut config);
    let mut q = std::collections::HashMap::new();
    for (k, v) in [
        ("from", &args.from),
        ("to", &args.to),
        ("mount", &args.mount),
        ("group", &args.group),
        ("service", &args.service),
        ("category", &args.category),
    ] {
        if let Some(v) = v {
            q.insert(k.to_owned(), v.clone());
        }
    }
    let name = match (args.report.as_str(), args.csv) {
        ("listening" | "tracks", true) => format!("{}.csv", args.report),
        _ => args.report.clone(),
    };
    let now = throng_server::ledger::now_ms();
    let req = throng_server::ledger::request::ReportRequest::parse(
        &name,
        &q,
        now,
        &throng_server::ledger::request::ReportDefaults::of(&config),
    )
    .map_err(anyhow::Error::msg)?;
    let mut db = match throng_server::ledger::open_for_reports(&config) {
        Ok(db) => db,
        Err(e @ throng_server::ledger::LedgerError::Missing(_)) => {
            // Exit 2, as for a wrong argument: nothing was read, nothing created.
            eprintln!("throng: {e}");
            std::process::exit(2);
        }
        Err(e) => return Err(e.into()),
    };
    if let Ok(Some(d)) = throng_server::config::LedgerDatabase::parse(
        config.ledger.database.as_deref().unwrap_or("off"),
    ) {
        eprintln!("throng: report from {}", d.display());
    }
    let out = throng_server::ledger::request::run(&mut db, &req, now)?;
    print!("{}", out.body);
    if !out.body.ends_with('\n') {
        println!();
    }
    if out.truncated {
        eprintln!(
            "throng: sessions cut at {} rows: ask for a shorter range",
            throng_server::ledger::request::MAX_SESSION_ROWS
        );
    }
    Ok(())
}
