//! The command line of `throng` (clap definitions): `serve`, `check-config`, `bench`,
//! `import-icecast` and `icecast` (Icecast's own command line, also taken when the binary is
//! invoked as `icecast` or `icecast2`), with their flags, and the hidden `manpage` and
//! `completions` that write the man pages and shell completions from these same definitions
//! (`deploy/generate.sh` commits them under `deploy/`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Throng: one live stream to a very large crowd of listeners.
#[derive(Debug, Parser)]
#[command(name = "throng", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the streaming server (Icecast-compatible).
    Serve(ServeArgs),
    /// Check a configuration as `serve` would (parse, validate, every file and directory it
    /// names); prints each problem with its key, exits 1 on any, 0 with "configuration OK".
    CheckConfig(CheckArgs),
    /// Run the load generator against any Icecast-compatible server.
    Bench(throng_bench::BenchArgs),
    /// Print the Throng TOML configuration equivalent to an Icecast icecast.xml (what is not
    /// carried over is listed in comments at the top, and on stderr).
    ImportIcecast(ImportArgs),
    /// Print an audience report from the ledger's database (no server needs to run):
    /// listening, tracks, plays, sessions, soundexchange or ppl.
    Report(ReportArgs),
    /// Icecast's command line (`-c FILE`, `-b`, `-v`): run an icecast.xml as Icecast would; the
    /// same as invoking the binary as `icecast` or `icecast2` (a symlink).
    Icecast(IcecastArgs),
    /// Write the man pages: throng.1 and one page per subcommand (throng-serve.1, ...).
    #[command(hide = true)]
    Manpage(ManpageArgs),
    /// Print the completion script of a shell on standard output.
    #[command(hide = true)]
    Completions(CompletionsArgs),
}

#[derive(Debug, clap::Args)]
pub struct ManpageArgs {
    /// Directory to write the pages to (created if missing).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// What `throng serve --help` and the throng-serve(1) page add after the options.
const SERVE_NOTES: &str = "\
Signals: SIGTERM and SIGINT stop the server cleanly (with `[limits] drain-timeout`, SIGTERM \
first drains: /healthz/ready turns false, new listeners are sent on, and the server exits once \
its listeners left or the timeout passed; a second SIGTERM stops at once); SIGHUP reloads the configuration file; \
SIGUSR1 reopens the access and error logs at their configured paths (send it after renaming \
them, as logrotate does); SIGUSR2 upgrades the binary in place.

Under systemd (Type=notify) the server sends READY=1 once its sockets accept connections and \
STOPPING=1 at shutdown. Deploy files (systemd unit, logrotate, Dockerfile) are in deploy/ of \
the source tree; see docs/operators.md.";

/// Icecast 2.4's options (`main.c:_parse_config_opts`), so that AzuraCast
/// (`/usr/local/bin/icecast -c FILE`), Debian's init script (`icecast2 -b -c FILE`) and hosting
/// panels start Throng unchanged.
#[derive(Debug, Parser)]
#[command(
    name = "icecast",
    about = "Throng run with Icecast's command line: icecast [-b] -c <file>, or icecast -v",
    disable_version_flag = true
)]
pub struct IcecastArgs {
    /// The Icecast configuration file (icecast.xml) to run; reloaded on SIGHUP.
    #[arg(short = 'c', value_name = "FILE", required_unless_present = "version")]
    pub config: Option<PathBuf>,
    /// Run in the background: detach from the console once the configuration is read (the
    /// starting process exits 0).
    #[arg(short = 'b')]
    pub background: bool,
    /// Print the version and exit.
    #[arg(short = 'v')]
    pub version: bool,
    /// Directory of the generated passwords and the default SQLite audience ledger (as
    /// `throng serve --state-dir`; `throng report` reads the ledger there too).
    #[arg(long, env = "THRONG_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log filter (as `throng serve --log`), over the file's `<loglevel>`.
    #[arg(long, env = "THRONG_LOG")]
    pub log: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Icecast configuration file; relative paths in it resolve against its directory.
    pub file: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// TOML configuration file; without it (and without --icecast-config), the embedded
    /// defaults.
    #[arg(long, short = 'c', conflicts_with = "icecast_config")]
    pub config: Option<PathBuf>,
    /// Icecast 2.4 configuration file (icecast.xml).
    #[arg(long)]
    pub icecast_config: Option<PathBuf>,
}

#[derive(Debug, Default, clap::Args)]
#[command(after_long_help = SERVE_NOTES)]
pub struct ServeArgs {
    /// TOML configuration file (see throng.example.toml); without it, embedded defaults with the
    /// demo mount.
    #[arg(long, short = 'c', conflicts_with = "icecast_config")]
    pub config: Option<PathBuf>,
    /// Icecast 2.4 configuration file (icecast.xml) to run on instead of a TOML file; what
    /// Throng does not support is printed as warnings at start-up.
    #[arg(long)]
    pub icecast_config: Option<PathBuf>,
    /// Listen address (replaces every `listen` of the file), e.g. 0.0.0.0:8000.
    #[arg(long)]
    pub listen: Vec<SocketAddr>,
    /// Source password (user `source`), overriding the file.
    #[arg(long, env = "THRONG_SOURCE_PASSWORD", hide_env_values = true)]
    pub source_password: Option<String>,
    /// Admin password (user `admin`), overriding the file.
    #[arg(long, env = "THRONG_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// This server's base URL as listeners reach it (`[cluster] public-url`, where an origin
    /// redirects them), overriding the file; e.g. http://203.0.113.7:8000.
    #[arg(long, env = "THRONG_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The cluster secret (`[cluster] secret`), overriding the file; a `[[relay]]` with
    /// `username = "edge"` and no password uses it.
    #[arg(long, env = "THRONG_CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Option<String>,
    /// The audience ledger's database (`[ledger] database`: sqlite:///path.db,
    /// postgres://user:password@host/db or off), overriding the file.
    #[arg(long, env = "THRONG_LEDGER_DATABASE", hide_env_values = true)]
    pub ledger_database: Option<String>,
    /// The address WebRTC viewers are told to send to (`[webrtc] public-address`, the ICE
    /// candidate), overriding the file; e.g. a Kubernetes pod's or node's IP.
    #[arg(long, env = "THRONG_WEBRTC_PUBLIC_ADDRESS")]
    pub webrtc_public_address: Option<std::net::IpAddr>,
    /// HTTPS listen address (replaces `[tls] listen` of the file), e.g. 0.0.0.0:8443; needs
    /// --tls-cert and --tls-key (or certificates in the file).
    #[arg(long)]
    pub tls_listen: Vec<SocketAddr>,
    /// PEM certificate chain for HTTPS, leaf first (e.g. Let's Encrypt's fullchain.pem);
    /// replaces the file's `[[tls.certificate]]`.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, RSA or EC; e.g. Let's Encrypt's privkey.pem).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Directory of the state file keeping generated passwords (passwords.toml); overrides
    /// `[paths] state-dir`; default $XDG_STATE_HOME/throng or ~/.local/state/throng.
    #[arg(long, env = "THRONG_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log filter (tracing's EnvFilter syntax), e.g. `debug` or `throng_server=debug`;
    /// overrides `[logging] level` (default `info`).
    #[arg(long, env = "THRONG_LOG")]
    pub log: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The report: `listening` and `tracks` (JSON, or CSV with --csv), `plays` (JSON),
    /// `sessions`, `soundexchange` and `ppl` (CSV); the same as /api/v1/reports/<name>.
    pub report: String,
    /// Start: Unix seconds or RFC 3339 (default: 7 days before --to).
    #[arg(long)]
    pub from: Option<String>,
    /// End: Unix seconds or RFC 3339 (default: now).
    #[arg(long)]
    pub to: Option<String>,
    /// Only this mount.
    #[arg(long)]
    pub mount: Option<String>,
    /// Grouping of `listening`: hour, day, country, path or agent (default day).
    #[arg(long)]
    pub group: Option<String>,
    /// `listening` and `tracks` as CSV rather than JSON.
    #[arg(long)]
    pub csv: bool,
    /// NAME_OF_SERVICE of `soundexchange` (default `[ledger] service`, else `[station] name`,
    /// else `server-id`).
    #[arg(long)]
    pub service: Option<String>,
    /// TRANSMISSION_CATEGORY of `soundexchange` (default `[ledger] category`).
    #[arg(long)]
    pub category: Option<String>,
    /// TOML configuration file whose `[ledger] database` is read.
    #[arg(long, short = 'c', conflicts_with = "icecast_config")]
    pub config: Option<PathBuf>,
    /// Icecast configuration file (icecast.xml) instead of a TOML file.
    #[arg(long)]
    pub icecast_config: Option<PathBuf>,
    /// The database, over the configuration's (`sqlite:///path` or `postgres://…`).
    #[arg(long)]
    pub database: Option<String>,
    /// State directory of the default SQLite ledger (as `throng serve --state-dir`).
    #[arg(long, env = "THRONG_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
}
