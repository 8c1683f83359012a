//! Server configuration: the TOML file (`throng serve --config throng.toml`), its defaults, and
//! per-mount settings matched by exact name or wildcard.
//!
//! Defaults follow Icecast 2.4.4 `cfgfile.c:_set_defaults` where Icecast has one (queue-size
//! 512000 bytes, burst-size 65536 bytes, header-timeout 15 s, source-timeout 10 s, sources 16,
//! metaint 16000 bytes), except that passwords have no well-known default: a missing password is
//! generated once, printed and kept in a state file (`source.rs`). See `throng.example.toml` for
//! every key. `source.rs` loads a configuration as a start or reload does (file, command-line
//! overrides, passwords); `check.rs` checks the files and directories it names.

pub mod cidr;
pub use cidr::parse_cidr;
pub mod check;
pub mod cluster;
pub mod default_passwords;
pub mod directory;
pub mod hls;
pub mod hooks;
pub mod icecast_xml;
pub mod ledger;
pub mod source;
pub mod station;
pub mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::distributions::{Alphanumeric, DistString};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use hls::{AacSegments, HlsConfig, HlsSettings, PlaylistMode, PART_TARGET_MS};
pub use ledger::{AddressPolicy, LedgerConfig, LedgerDatabase};

/// Errors reading the configuration.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema (unknown keys are errors).
    #[error("invalid configuration {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML error, with line and column.
        source: toml::de::Error,
    },
    /// A value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// The configuration cannot be written as TOML (e.g. a path that is not UTF-8).
    #[error("cannot write the configuration as TOML: {0}")]
    Serialize(#[from] toml::ser::Error),
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// Addresses to listen on (`ADDR:PORT`); default `127.0.0.1:8000`.
    pub listen: Vec<SocketAddr>,
    /// Host name used in `listenurl` (status JSON); default `localhost`.
    pub hostname: String,
    /// `location` in the status JSON.
    pub location: String,
    /// `admin` contact in the status JSON.
    pub admin_email: String,
    /// `Server:` header and `server_id` in the status JSON; default `Throng <version>` (left
    /// out of a written configuration while it is the default, so an upgrade changes it).
    #[serde(skip_serializing_if = "is_default_server_id")]
    pub server_id: String,
    /// Fan-out shard threads; 0 means one per CPU core.
    pub workers: usize,
    /// Serve the built-in demo mount (a tone looped in real time). True with no config file.
    pub demo: bool,
    /// Mount name of the demo.
    pub demo_mount: String,
    /// Limits and timeouts.
    pub limits: Limits,
    /// Global credentials.
    pub authentication: Authentication,
    /// Log destinations.
    pub logging: Logging,
    /// Per-mount settings, first match wins (exact names before wildcards is up to the order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mount: Vec<MountConfig>,
    /// File locations and access filters (Icecast `<paths>`).
    pub paths: Paths,
    /// Headers added to every listener response (Icecast global `<http-headers>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    /// Mount fed by SHOUTcast v1 sources on the port after the first listen port (Icecast
    /// `<shoutcast-mount>`); none disables the SHOUTcast source port.
    pub shoutcast_mount: Option<String>,
    /// Static relays: mounts pulled from other servers (Icecast `<relay>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relay: Vec<RelayConfig>,
    /// Master server whose `/admin/streamlist.txt` is relayed (Icecast `<master-server>`).
    pub master: Option<MasterConfig>,
    /// HTTPS sockets and certificates (`tls.rs`).
    #[serde(skip_serializing_if = "tls::TlsConfig::is_default")]
    pub tls: tls::TlsConfig,
    /// The now-playing event stream `/api/v1/events`.
    pub events: EventsConfig,
    /// Origin and edges: edge reports and overflow redirects (`config/cluster.rs`).
    pub cluster: cluster::ClusterConfig,
    /// HLS output of MP3/AAC mounts (`config/hls.rs`).
    pub hls: HlsConfig,
    /// WebRTC playback (WHEP) of Ogg/Opus, MP3 and AAC mounts: on in the embedded defaults,
    /// with a file on when `enabled` or `udp-listen` says so ([`WebrtcConfig::udp_address`]).
    pub webrtc: WebrtcConfig,
    /// The audience ledger: every listening session and title change (`config/ledger.rs`).
    pub ledger: LedgerConfig,
    /// The station's name, description, logo and site on the station page (`station.rs`).
    #[serde(skip_serializing_if = "station::StationConfig::is_default")]
    pub station: station::StationConfig,
    /// YP directories public mounts are listed in (Icecast `<directory>`; `yp/`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directory: Vec<directory::DirectoryConfig>,
    /// Event hooks of every mount (Icecast 2.5 global `<event-bindings>`; `config/hooks.rs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<hooks::HookConfig>,
    /// `[hooks]`: how many hooks run at once and wait (`config/hooks.rs`).
    #[serde(skip_serializing_if = "hooks::HookLimits::is_default")]
    pub hooks: hooks::HookLimits,
}

/// The values `[webrtc] transcode-frame-ms` takes, in ms: the Opus packet times the
/// transcoder (`transcode/`) writes. Packet times libopus encodes (`opus_encode` takes 20, 40,
/// 60, 80, 100 or 120 ms; a packet over 20 ms holds several frames, a code 1, 2 or 3 packet,
/// RFC 6716 §3.2), which every WebRTC Opus decoder plays (RFC 7587 §4.2: a packet may hold up
/// to 120 ms). Longer packets mean fewer packets per viewer (the cost of a WHEP viewer is per
/// packet: its SRTP, its str0m round, its datagram) at the price of their length in latency
/// and in audio lost with a lost packet. 100 and 120 ms are left out: at 100 ms, 68 of 2,000
/// viewers had gaps over 200 ms (docs/BENCHMARKS.md, issue 25), and the transcoder's packet
/// size cap (`transcode::frames::MAX_RTP_OPUS_PAYLOAD`) would hold them under 96 kbit/s.
pub const TRANSCODE_FRAME_MS: [u32; 4] = [20, 40, 60, 80];

/// `[webrtc]`: WHEP playback (draft-ietf-wish-whep) of Ogg/Opus, MP3 and AAC mounts (these two
/// transcoded to Opus, `transcode/`), ICE-lite (`POST /whep/<mount>`), over one UDP socket per
/// fan-out shard (`fanout/whep/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct WebrtcConfig {
    /// `true` turns WebRTC on (on `udp-listen`, else on the HTTP port's number), `false` off
    /// whatever `udp-listen` says; unset (a file's default) it is on exactly when `udp-listen`
    /// is set. The embedded defaults set it to `true` (issue 25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// UDP address of the first WebRTC engine (e.g. `0.0.0.0:8443`); engine i of the
    /// one-per-shard engines binds port + i. Unset: the first `listen` address's IP with the
    /// HTTP port's number (when `enabled`).
    pub udp_listen: Option<SocketAddr>,
    /// Address announced as the ICE candidate when it differs from `udp-listen` (behind NAT,
    /// or when listening on `0.0.0.0`); the port is `udp-listen`'s.
    pub public_address: Option<std::net::IpAddr>,
    /// Duration of each Opus packet the transcoder writes for WebRTC viewers of MP3 and AAC
    /// mounts, in ms: 20, 40, 60 or 80 (default `transcode::frames::DEFAULT_FRAME_MS`, 60).
    /// A viewer costs the server mostly per packet, so longer packets cost less, for their
    /// length in latency. Ogg/Opus mounts keep their source's packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcode_frame_ms: Option<u32>,
}

impl WebrtcConfig {
    /// The UDP address of the first WebRTC engine, `None` when WebRTC is off: `udp-listen`
    /// when set (unless `enabled = false`), else with `enabled = true` the address `http`
    /// (the first HTTP socket as bound: its IP and port number, over UDP).
    pub fn udp_address(&self, http: SocketAddr) -> Option<SocketAddr> {
        match (self.enabled, self.udp_listen) {
            (Some(false), _) => None,
            (_, Some(addr)) => Some(addr),
            (Some(true), None) => Some(http),
            (None, None) => None,
        }
    }
}

/// `[events]`: the server-sent event stream `/api/v1/events` (times in milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct EventsConfig {
    /// A heartbeat comment goes to idle subscribers this often (default 15000).
    pub heartbeat_ms: u64,
    /// A subscriber whose socket stays full this long is dropped (default 10000).
    pub stall_timeout_ms: u64,
    /// Kernel send buffer per subscriber socket in bytes (default 16384; 0 keeps the system
    /// default). Events are small: a small buffer bounds what a stalled subscriber holds.
    pub sndbuf: usize,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            heartbeat_ms: 15_000,
            stall_timeout_ms: 10_000,
            sndbuf: 16_384,
        }
    }
}

/// `[paths]`: files and access filters, as Icecast `<paths>` (and Icecast-KH for
/// `x-forwarded-for` and `deny-agents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Paths {
    /// Directory of static files; a `fallback-mount` naming a file in it (e.g. `/silence.mp3`)
    /// plays that file looped in real time. Its `index.html` and `static/<file>` replace the
    /// station page and its files (`admin/station.rs`).
    pub webroot: Option<PathBuf>,
    /// File of client IP addresses (one per line, `#` comments) refused with 403.
    pub deny_ip: Option<PathBuf>,
    /// File of the only client IP addresses allowed; others are refused with 403.
    pub allow_ip: Option<PathBuf>,
    /// File of `User-Agent` patterns (one per line, `*`/`?` globs) refused with 403.
    pub deny_agents: Option<PathBuf>,
    /// Proxies trusted to set `X-Forwarded-For`, as CIDR ranges (`10.0.0.0/8`) or addresses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub x_forwarded_for: Vec<String>,
    /// Load balancers that send the PROXY protocol header (v1 or v2, HAProxy `send-proxy`),
    /// as CIDR ranges or addresses: from these peers the header's client address replaces the
    /// peer's (a connection without the header is served as is).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy_protocol_from: Vec<String>,
    /// Directory of the state file holding generated passwords (`passwords.toml`); default
    /// `$XDG_STATE_HOME/throng` or `~/.local/state/throng`. `--state-dir` and
    /// `THRONG_STATE_DIR` override it (see `config/source.rs`).
    pub state_dir: Option<PathBuf>,
    /// Serve the files of `webroot` at their paths (`/player.html` is `<webroot>/player.html`)
    /// to GET requests for which no mount is live (Icecast `<fileserve>`); plain names only,
    /// nothing outside the webroot, at most 16 MiB each, streamed from disk with byte ranges,
    /// `ETag` and `Last-Modified` (`admin/fileserve.rs`). Default false.
    #[serde(skip_serializing_if = "is_false")]
    pub fileserve: bool,
    /// File the server writes its process id to (one decimal line) once its sockets listen,
    /// and removes when it stops, as Icecast `<pidfile>` (`main.c`). None writes no file.
    pub pidfile: Option<PathBuf>,
    /// Request paths served as another path (Icecast `<alias source= destination=>`, e.g. `/`
    /// as `/status.xsl`), exact matches, first match wins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alias: Vec<Alias>,
}

/// `[[paths.alias]]`: a request for `source` is answered as one for `destination` (Icecast
/// 2.4.4 `connection.c:_handle_get_request`: exact path, the query string kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Alias {
    /// The path as requested, e.g. `/`.
    pub source: String,
    /// The path answered instead, e.g. `/status.xsl`.
    pub destination: String,
}

/// The file in `webroot` of a fallback-mount `target` such as `/fallback-[128].mp3`: the file
/// of that exact name, else (Icecast-KH embeds the bitrate to pace a file at in `[...]`; Throng
/// paces every file by its frames) the name without its bracketed number, `/fallback-.mp3`.
/// The exact name's path when neither exists (for the problem report).
pub fn webroot_file(webroot: &Path, target: &str) -> PathBuf {
    let rel = target.trim_start_matches('/');
    let exact = webroot.join(rel);
    if exact.is_file() {
        return exact;
    }
    let stripped = match (rel.rfind('['), rel.rfind(']')) {
        (Some(open), Some(close))
            if open < close && rel[open + 1..close].chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{}{}", &rel[..open], &rel[close + 1..])
        }
        _ => return exact,
    };
    let other = webroot.join(stripped);
    if other.is_file() {
        other
    } else {
        exact
    }
}

impl Paths {
    /// The path a request for `path` is answered as: the destination of the first alias whose
    /// source is exactly `path`, else `path`.
    pub fn resolve_alias<'a>(&'a self, path: &'a str) -> &'a str {
        self.alias
            .iter()
            .find(|a| a.source == path)
            .map_or(path, |a| a.destination.as_str())
    }
}

/// One `name: value` response header (Icecast `<header name= value=>`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// `[[relay]]`: a mount pulled from another server over HTTP, as Icecast 2.4.4 `<relay>`
/// (`slave.c`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct RelayConfig {
    /// Upstream host name or address.
    pub server: String,
    /// Upstream port (default 8000).
    pub port: u16,
    /// Upstream mount (default `/`).
    pub mount: String,
    /// Local mount name (default: the upstream mount).
    pub local_mount: Option<String>,
    /// User for HTTP Basic auth upstream, if any.
    pub username: Option<String>,
    /// Password for HTTP Basic auth upstream, if any.
    pub password: Option<String>,
    /// Ask upstream for ICY metadata and carry titles over (Icecast `relay-shoutcast-metadata`,
    /// default true).
    pub relay_metadata: bool,
    /// Connect only while the local mount has listeners (Icecast `on-demand`).
    pub on_demand: bool,
    /// Connect with TLS (HTTPS), verifying the upstream's certificate against `[tls] ca-file`
    /// or the web PKI roots (Icecast 2.5 `<relay tls="1">`).
    #[serde(skip_serializing_if = "is_false")]
    pub tls: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            server: String::new(),
            port: 8000,
            mount: "/".into(),
            local_mount: None,
            username: None,
            password: None,
            relay_metadata: true,
            on_demand: false,
            tls: false,
        }
    }
}

impl RelayConfig {
    /// The local mount name.
    pub fn local(&self) -> &str {
        self.local_mount.as_deref().unwrap_or(&self.mount)
    }
}

/// `[master]`: relay every mount a master server lists in `/admin/streamlist.txt`, as Icecast
/// 2.4.4 `<master-server>` (`slave.c`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct MasterConfig {
    /// Master host.
    pub server: String,
    /// Master port (default 8000).
    pub port: u16,
    /// Relay user on the master (default `relay`).
    pub username: String,
    /// Relay password on the master.
    pub password: String,
    /// Seconds between polls of the stream list (Icecast `master-update-interval`, 120).
    pub update_interval: u64,
    /// Relay the listed mounts on demand only (Icecast `relays-on-demand`).
    pub on_demand: bool,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            server: String::new(),
            port: 8000,
            username: "relay".into(),
            password: String::new(),
            update_interval: 120,
            on_demand: false,
        }
    }
}

/// Listener or source authentication of a mount (Icecast `<authentication type=...>` in a
/// `<mount>`, `auth_htpasswd.c` and `auth_url.c`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AuthConfig {
    /// Listeners log in with a user in an htpasswd file (`user:md5hex` lines as Icecast writes
    /// them, or Apache `$apr1$`/bcrypt/SHA lines).
    Htpasswd {
        /// The file.
        filename: PathBuf,
        /// Let one user listen more than once at a time on a mount (Icecast
        /// `allow_duplicate_users`, default false: a second login is refused with 401).
        #[serde(default, rename = "allow-duplicate-users")]
        allow_duplicate_users: bool,
    },
    /// An HTTP server decides, through POSTed callbacks.
    Url(Box<UrlAuthConfig>),
}

/// Options of the `url` authenticator, as Icecast 2.4.4 `auth_url.c`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct UrlAuthConfig {
    /// URL called when a listener connects (`action=listener_add`).
    pub listener_add: Option<String>,
    /// URL called when a listener leaves (`action=listener_remove`).
    pub listener_remove: Option<String>,
    /// URL called when a source starts on the mount (`action=mount_add`).
    pub mount_add: Option<String>,
    /// URL called when a source stops (`action=mount_remove`).
    pub mount_remove: Option<String>,
    /// URL that authenticates source clients (`action=stream_auth`).
    pub stream_auth: Option<String>,
    /// User for Basic auth against the callback server.
    pub username: Option<String>,
    /// Password for Basic auth against the callback server.
    pub password: Option<String>,
    /// Request headers forwarded to `listener_add` (comma-separated names).
    pub headers: Option<String>,
    /// Prefix for forwarded header names (default none, as Icecast 2.4.4).
    pub header_prefix: Option<String>,
    /// Reply header that accepts a listener (default `icecast-auth-user: 1`).
    pub auth_header: Option<String>,
    /// Reply header giving a listening time limit in seconds (default
    /// `icecast-auth-timelimit:`).
    pub timelimit_header: Option<String>,
    /// Seconds to wait for the callback server (default 5).
    pub timeout: Option<u64>,
    /// Let one Basic-auth user listen more than once at a time on a mount (Icecast
    /// `allow_duplicate_users`, default false).
    pub allow_duplicate_users: bool,
}

/// `[limits]`: sizes in bytes, timeouts in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Limits {
    /// Most simultaneous connections of any kind (Icecast `clients`); 0 means the process's
    /// open-file limit less a reserve of 64.
    pub clients: usize,
    /// Most simultaneous source clients (Icecast `sources`, default 16).
    pub sources: usize,
    /// Most bytes a listener may lag behind the live edge before it is dropped or skipped
    /// (Icecast `queue-size`, default 512000).
    pub queue_size: usize,
    /// Bytes sent at once to a new listener (Icecast `burst-size`, default 65536; 0 disables).
    pub burst_size: usize,
    /// Seconds a client may take to send its request head (Icecast `header-timeout`, 15).
    pub header_timeout: u64,
    /// Seconds an admin API request may take to send its body once authorized (default 10);
    /// then it gets 408 and is closed.
    pub body_timeout: u64,
    /// Most connections still reading their request head (they hold no `clients` slot); more
    /// get 503. 0 (the default) means a quarter of the process's open-file limit, at least 64.
    pub pending_clients: usize,
    /// Most connections still reading their head from one address (one IPv6 /64), enforced
    /// once half of `pending-clients` is in use (default 32; trusted proxies are exempt, and
    /// behind a `proxy-protocol-from` balancer the client its PROXY header names is the
    /// address); more get 503.
    pub pending_per_address: usize,
    /// Slots above `clients` that only admin requests and source logins may take, so that
    /// listeners filling `clients` never lock out the operator or the encoder (default 16).
    pub reserved_clients: usize,
    /// Seconds a source may stay silent before it is closed (Icecast `source-timeout`, 10).
    pub source_timeout: u64,
    /// Milliseconds between coalesced writes to one listener (default 1000).
    pub write_interval_ms: u64,
    /// What happens to a listener lagging more than queue-size: `drop` (Icecast) or `skip`
    /// (jump to the burst point, as Icecast-KH's requeue).
    pub lag_policy: LagPolicy,
    /// ICY metadata interval in bytes (Icecast `mp3-metadata-interval`, 16000).
    pub metaint: usize,
    /// Kernel send buffer per listener socket in bytes (0 keeps the system default).
    pub listener_sndbuf: usize,
    /// Seconds a drain keeps the listeners the server has (default 0, at most 86,400): with
    /// more than 0, SIGTERM starts a drain (new listeners are sent on, `/healthz/ready` says
    /// false) and the server exits once they have left or this time has passed, closing the
    /// rest as `shutdown:drained`; a second SIGTERM, or SIGINT, stops at once. 0: SIGTERM
    /// stops at once, as Icecast 2.4.4. `POST /api/v1/drain` drains for this time whatever
    /// it is. Keep it under a Kubernetes pod's `terminationGracePeriodSeconds`
    /// (docs/SCALING.md, "On Kubernetes").
    pub drain_timeout: u64,
}

/// Most seconds `[limits] drain-timeout` may say (one day).
pub const MAX_DRAIN_TIMEOUT: u64 = 86_400;

/// What to do with a listener that lags more than queue-size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LagPolicy {
    /// Disconnect it ("fallen too far behind"), as Icecast 2.4.4.
    Drop,
    /// Move it to the burst point of the live stream.
    Skip,
}

/// `[authentication]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Authentication {
    /// Password of user `source` for every mount without its own; generated when absent.
    pub source_password: Option<String>,
    /// Admin user name (default `admin`).
    pub admin_user: Option<String>,
    /// Admin password; generated when absent.
    pub admin_password: Option<String>,
    /// User that slaves log in with to read `/admin/streamlist.txt` (default `relay`).
    pub relay_user: Option<String>,
    /// Password of the relay user; without one, only the admin may read the stream list.
    pub relay_password: Option<String>,
    /// Password of user `metrics` for `/metrics`. With one, `/metrics` needs those Basic
    /// credentials (or the admin's) and shows every mount; without, `/metrics` is public and
    /// leaves hidden mounts out (with admin credentials it shows them).
    pub metrics_password: Option<String>,
    /// Password of user `cache-log` for `POST /api/v1/hls/cache-logs` (the cache tier's
    /// request logs) and nothing else; the admin's credentials open it too. Without one, only
    /// the admin may post cache logs. Issue 42, item 4.
    pub cache_log_password: Option<String>,
    /// What a mount's source credentials may do on the admin endpoints: `full` (default, as
    /// Icecast 2.4.4: every command on their mount, `killsource`, `killclient`, `moveclients`,
    /// `listclients`...) or `metadata-only` (metadata updates only).
    pub source_admin: SourceAdmin,
    /// Failed logins (source, admin, listener, metrics) from one address within
    /// `failed-login-window` that block it; 0 turns throttling off. Default 10.
    pub max_failed_logins: Option<u32>,
    /// Window of `max-failed-logins`, in seconds. Default 60.
    pub failed_login_window: Option<u64>,
    /// How long a blocked address gets 429 for any request with credentials, in seconds.
    /// Default 60.
    pub failed_login_block: Option<u64>,
}

/// The failed-login throttle's settings, as [`Config::login_throttle`] reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginThrottle {
    /// Failures within `window` that block an address; 0: no throttling.
    pub max_failures: u32,
    /// The window failures are counted in.
    pub window: Duration,
    /// How long a blocked address is refused.
    pub block: Duration,
}

/// `[authentication] source-admin`: what source credentials open on the admin endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SourceAdmin {
    /// Every command on their own mount (Icecast 2.4.4 `admin_handle_request`).
    #[default]
    Full,
    /// Only `metadata` (and the admin API's metadata update) on their own mount.
    MetadataOnly,
}

/// `[logging]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Logging {
    /// Access log (Combined Log Format plus duration): a file path, `-` for standard output, or
    /// empty to disable. Default `-`.
    pub access_log: String,
    /// Error log, the server's own diagnostics (Icecast `errorlog`): a file path (appended
    /// to), or `-` or empty for standard error. Default `-`. Used by the `throng` binary.
    pub error_log: String,
    /// Diagnostics level: `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter such
    /// as `throng_server=debug` (Icecast `loglevel` 1–4 maps to error…debug). `--log` and
    /// `THRONG_LOG` override it. Default `info`.
    pub level: String,
    /// Size in KiB past which the access and error log files are rotated (Icecast
    /// `<logsize>`): renamed to `NAME.old`, or `NAME.YYYYMMDD_HHMMSS` with `logarchive`, and
    /// a new file opened. None or 0: never (rotate with logrotate and SIGUSR1 instead).
    pub logsize: Option<u64>,
    /// Keep every rotated file, named with its time (Icecast `<logarchive>`), instead of one
    /// `NAME.old`.
    #[serde(skip_serializing_if = "is_false")]
    pub logarchive: bool,
}

/// `[[mount]]`: settings for mounts whose name matches `name` (exact or a glob like `/live*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct MountConfig {
    /// Mount name or glob pattern (`*`, `?`, `[...]`), starting with `/`.
    pub name: String,
    /// Source user for this mount (default `source`).
    pub username: Option<String>,
    /// Source password for this mount (overrides the global one).
    pub password: Option<String>,
    /// Most listeners on this mount; none means unlimited.
    pub max_listeners: Option<u32>,
    /// Overrides the source's `ice-name`.
    pub stream_name: Option<String>,
    /// Overrides the source's `ice-description`.
    pub stream_description: Option<String>,
    /// Overrides the source's `ice-url`.
    pub stream_url: Option<String>,
    /// Overrides the source's `ice-genre`.
    pub genre: Option<String>,
    /// Overrides the announced bitrate (kbit/s).
    pub bitrate: Option<String>,
    /// Overrides `ice-public`.
    pub public: Option<bool>,
    /// Leave the mount out of public status pages (`/status-json.xsl`, `/api/v1/status`).
    #[serde(skip_serializing_if = "is_false")]
    pub hidden: bool,
    /// Per-mount queue-size in bytes.
    pub queue_size: Option<usize>,
    /// Per-mount burst-size in bytes.
    pub burst_size: Option<usize>,
    /// Where listeners go when the source stops, or join while it is down: another mount or a
    /// webroot file (Icecast `fallback-mount`). Followed for at most 10 hops.
    pub fallback_mount: Option<String>,
    /// Bring listeners back from the fallback when the source returns (Icecast
    /// `fallback-override`).
    #[serde(skip_serializing_if = "is_false")]
    pub fallback_override: bool,
    /// Send new listeners to the fallback when max-listeners is reached, instead of a 403
    /// (Icecast `fallback-when-full`).
    #[serde(skip_serializing_if = "is_false")]
    pub fallback_when_full: bool,
    /// File played to each new listener before the stream (Icecast `intro`); same format as
    /// the mount.
    pub intro: Option<PathBuf>,
    /// Seconds after which a listener is disconnected (Icecast `max-listener-duration`).
    pub max_listener_duration: Option<u64>,
    /// Feed this mount by looping the file in real time (MP3, AAC or Ogg), with no source
    /// client: an always-on mount, e.g. a fallback.
    pub file: Option<PathBuf>,
    /// Listener (and, for `url`, source) authentication.
    pub authentication: Option<AuthConfig>,
    /// Headers added to this mount's listener responses, after the global ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    /// Serve this mount as HLS too (default `[hls] enabled`).
    pub hls: Option<bool>,
    /// HLS segment target duration in seconds (default `[hls] segment-seconds`).
    pub hls_segment_seconds: Option<u64>,
    /// Segments in this mount's HLS playlist (default `[hls] window`).
    pub hls_window: Option<usize>,
    /// Character set of titles from legacy sources (SHOUTcast v1 logins, `admin/metadata`
    /// updates without `charset=`), converted to UTF-8 as Icecast `<charset>` does (a WHATWG
    /// label such as `ISO8859-1`, `latin1`, `windows-1251`); default UTF-8. A title that is
    /// valid UTF-8 is kept as it is.
    pub charset: Option<String>,
    /// Event hooks of this mount, after the global `[[hook]]`s (Icecast 2.5 `<event-bindings>`
    /// in a `<mount>`, Icecast-KH `<on-connect>`/`<on-disconnect>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<hooks::HookConfig>,
    /// ICY metadata interval in bytes for new listeners of this mount (Icecast
    /// `<mp3-metadata-interval>`); default `limits.metaint`.
    pub mp3_metadata_interval: Option<u32>,
    /// The mount's cluster password sent to YP directories as `cpswd` (Icecast
    /// `<cluster-password>`: directories group mounts that share one).
    pub cluster_password: Option<String>,
    /// Record the mount's stream to this file (Icecast `<dump-file>`): a strftime pattern in
    /// local time, e.g. `/srv/rec/live-%Y%m%d-%H%M%S.mp3`, appended to. A new file is opened
    /// when a source goes live, after each reload and after SIGUSR1 (`dump_file.rs`).
    pub dump_file: Option<String>,
    /// Close the recording once more than this many bytes were written, until the next
    /// reload, SIGUSR1 or source (Icecast 2.5 `<dump-file-size-limit>`); 0 or absent: none.
    pub dump_file_size_limit: Option<u64>,
    /// Close the recording once it has been open this many seconds, until the next reload,
    /// SIGUSR1 or source (Icecast 2.5 `<dump-file-time-limit>`); 0 or absent: none.
    pub dump_file_time_limit: Option<u64>,
    /// Most bits per second read from this mount's source (Icecast-KH `<limit-rate>`): a
    /// source sending faster is read more slowly (the encoder waits), never disconnected.
    pub limit_rate: Option<u64>,
    /// Shared (cacheable) or per-session media playlists for this mount (default
    /// `[hls] playlists`).
    pub hls_playlists: Option<hls::PlaylistMode>,
    /// The container of this mount's HLS segments when it is AAC: `packed` or `fmp4` (default
    /// `[hls] aac-segments`).
    pub hls_aac_segments: Option<hls::AacSegments>,
    /// Low-latency HLS for this mount (default `[hls] low-latency`).
    pub hls_low_latency: Option<bool>,
    /// Sign this mount's HLS session tokens with this secret (default `[hls]
    /// secure-link-secret`).
    pub hls_secure_link_secret: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The encoding named by a `charset` label (Icecast `<charset>`): any WHATWG label, e.g.
/// `ISO8859-1`, `latin1`, `windows-1251` (the Latin-1 labels decode as windows-1252, as browsers
/// do: the same characters, plus printable ones where Latin-1 has C1 controls); `None` when
/// unknown.
pub fn charset_encoding(label: &str) -> Option<&'static encoding_rs::Encoding> {
    encoding_rs::Encoding::for_label(label.trim().as_bytes())
}

/// Text sent by a legacy source (an ICY title, an `admin/metadata` value without `charset=`)
/// as UTF-8, as Icecast converts from the mount's `<charset>`: valid UTF-8 is kept as it is;
/// other bytes are decoded in `charset` (a [`charset_encoding`] label), else as ISO-8859-1
/// (Icecast's default for MP3 metadata).
pub fn decode_legacy_text(bytes: &[u8], charset: Option<&str>) -> String {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_owned();
    }
    match charset.and_then(charset_encoding) {
        Some(enc) => enc.decode_without_bom_handling(bytes).0.into_owned(),
        None => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// The default `server-id`: `Throng <version>`.
pub fn default_server_id() -> String {
    format!("Throng {}", env!("CARGO_PKG_VERSION"))
}

fn is_default_server_id(id: &String) -> bool {
    *id == default_server_id()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec!["127.0.0.1:8000".parse().expect("literal address")],
            hostname: "localhost".into(),
            location: "Earth".into(),
            admin_email: "icemaster@localhost".into(),
            server_id: default_server_id(),
            workers: 0,
            demo: false,
            demo_mount: "/demo.mp3".into(),
            limits: Limits::default(),
            authentication: Authentication::default(),
            logging: Logging::default(),
            mount: Vec::new(),
            paths: Paths::default(),
            http_headers: Vec::new(),
            shoutcast_mount: None,
            relay: Vec::new(),
            master: None,
            tls: tls::TlsConfig::default(),
            events: EventsConfig::default(),
            cluster: cluster::ClusterConfig::default(),
            hls: HlsConfig::default(),
            ledger: LedgerConfig::default(),
            webrtc: WebrtcConfig::default(),
            station: station::StationConfig::default(),
            hook: Vec::new(),
            hooks: hooks::HookLimits::default(),
            directory: Vec::new(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            clients: 0,
            sources: 16,
            queue_size: 512_000,
            burst_size: 65_536,
            header_timeout: 15,
            body_timeout: 10,
            pending_clients: 0,
            pending_per_address: 32,
            reserved_clients: 16,
            source_timeout: 10,
            write_interval_ms: 1000,
            lag_policy: LagPolicy::Drop,
            metaint: throng_proto::icy::DEFAULT_METAINT,
            listener_sndbuf: 0,
            drain_timeout: 0,
        }
    }
}

impl Default for Logging {
    fn default() -> Self {
        Logging {
            access_log: "-".into(),
            error_log: "-".into(),
            level: "info".into(),
            logsize: None,
            logarchive: false,
        }
    }
}

impl Config {
    /// The embedded defaults of `throng serve` with no arguments: `127.0.0.1:8000` and the demo.
    pub fn embedded() -> Config {
        Config {
            demo: true,
            // WebRTC on, on the HTTP port's number (issue 25): the demo plays over WHEP at once.
            webrtc: WebrtcConfig {
                enabled: Some(true),
                ..WebrtcConfig::default()
            },
            ..Config::default()
        }
    }

    /// Reads and validates a TOML file.
    ///
    /// Errors: [`ConfigError::Read`] when the file cannot be read, [`ConfigError::Parse`] (with
    /// the path) for TOML that does not fit the schema, [`ConfigError::Invalid`] as
    /// [`Config::validate`].
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let cfg = Config::parse_file(path)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and parses a TOML file without [`Config::validate`] (the caller validates once
    /// the command-line overrides are applied: an edge's `public-url` may come from
    /// `THRONG_PUBLIC_URL`).
    ///
    /// Errors: [`ConfigError::Read`] and [`ConfigError::Parse`], naming the file.
    pub fn parse_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Parses and validates TOML text.
    ///
    /// Errors: [`ConfigError::Parse`] (with an empty path) for TOML that does not fit the
    /// schema, [`ConfigError::Invalid`] as [`Config::validate`].
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: PathBuf::new(),
            source,
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The configuration as TOML text that [`Config::from_toml`] reads back to an equal
    /// configuration (every key written, defaults included; unset options left out).
    ///
    /// Errors: [`ConfigError::Serialize`] when a value has no TOML form (a non-UTF-8 path).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        Ok(toml::to_string(self)?)
    }

    /// `[station]` as the `[[mount]]` entries describe it (an icecast.xml import has no
    /// station-wide name): see [`station::StationConfig::from_mounts`].
    pub fn station_from_mounts(&self) -> station::StationConfig {
        let mounts: Vec<[Option<&str>; 3]> = self
            .mount
            .iter()
            .map(|m| {
                [
                    m.stream_name.as_deref(),
                    m.stream_description.as_deref(),
                    m.stream_url.as_deref(),
                ]
            })
            .collect();
        station::StationConfig::from_mounts(&mounts)
    }

    /// The ICY metadata interval (bytes) of a new listener of mount `name`: its
    /// `mp3-metadata-interval`, else `limits.metaint` (Icecast-KH: it applies to listeners
    /// joining this mount, not to those falling back to it).
    pub fn metaint_for(&self, name: &str) -> u32 {
        self.mount_for(name)
            .and_then(|m| m.mp3_metadata_interval)
            .unwrap_or(u32::try_from(self.limits.metaint).unwrap_or(u32::MAX))
    }

    /// Checks ranges and mount names.
    ///
    /// Errors: [`ConfigError::Invalid`] naming the first key out of range or inconsistent.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() {
            return Err(ConfigError::Invalid("`listen` is empty".into()));
        }
        self.station.check().map_err(ConfigError::Invalid)?;
        if self.limits.drain_timeout > MAX_DRAIN_TIMEOUT {
            return Err(ConfigError::Invalid(format!(
                "`limits.drain-timeout` must be at most {MAX_DRAIN_TIMEOUT} seconds"
            )));
        }
        hls::check_seconds("hls.segment-seconds", Some(self.hls.segment_seconds))
            .and_then(|()| hls::check_window("hls.window", Some(self.hls.window)))
            .map_err(ConfigError::Invalid)?;
        if let Some(ms) = self.webrtc.transcode_frame_ms {
            if !TRANSCODE_FRAME_MS.contains(&ms) {
                return Err(ConfigError::Invalid(format!(
                    "webrtc.transcode-frame-ms = {ms}: Opus packets of 20, 40, 60 or 80 ms only"
                )));
            }
        }
        if let Some(db) = &self.ledger.database {
            LedgerDatabase::parse(db).map_err(ConfigError::Invalid)?;
        }
        for (i, d) in self.directory.iter().enumerate() {
            d.check(&format!("directory[{i}]"))
                .map_err(ConfigError::Invalid)?;
        }
        for (i, h) in self.hook.iter().enumerate() {
            h.check(&format!("hook[{i}]"))
                .map_err(ConfigError::Invalid)?;
        }
        self.hls.check_cache_logs().map_err(ConfigError::Invalid)?;
        hls::check_secure_link(
            "[hls]",
            self.hls.secure_link_secret.as_deref(),
            self.hls.playlists,
            self.hls.secure_link_seconds,
        )
        .map_err(ConfigError::Invalid)?;
        for m in &self.mount {
            if m.mp3_metadata_interval
                .is_some_and(|i| !(1..=65_535).contains(&i))
            {
                return Err(ConfigError::Invalid(format!(
                    "mount {}: mp3-metadata-interval must be between 1 and 65535 bytes",
                    m.name
                )));
            }
            for (i, h) in m.hook.iter().enumerate() {
                h.check(&format!("mount {}: hook[{i}]", m.name))
                    .map_err(ConfigError::Invalid)?;
            }
            if let Some(c) = m.charset.as_deref() {
                if charset_encoding(c).is_none() {
                    return Err(ConfigError::Invalid(format!(
                        "mount {}: charset {c:?} is not a known character set",
                        m.name
                    )));
                }
            }
            hls::check_seconds("hls-segment-seconds", m.hls_segment_seconds)
                .and_then(|()| hls::check_window("hls-window", m.hls_window))
                .and_then(|()| {
                    hls::check_secure_link(
                        &m.name,
                        m.hls_secure_link_secret
                            .as_deref()
                            .or(self.hls.secure_link_secret.as_deref()),
                        m.hls_playlists.unwrap_or(self.hls.playlists),
                        self.hls.secure_link_seconds,
                    )
                })
                .map_err(ConfigError::Invalid)?;
        }
        if self.limits.metaint == 0 || self.limits.metaint > 1 << 20 {
            return Err(ConfigError::Invalid(
                "`limits.metaint` must be 1..=1048576".into(),
            ));
        }
        if self.limits.write_interval_ms == 0 || self.limits.write_interval_ms > 10_000 {
            return Err(ConfigError::Invalid(
                "`limits.write-interval-ms` must be 1..=10000".into(),
            ));
        }
        if self.limits.queue_size < 1024 {
            return Err(ConfigError::Invalid(
                "`limits.queue-size` must be ≥ 1024".into(),
            ));
        }
        for m in &self.mount {
            if !m.name.starts_with('/') {
                return Err(ConfigError::Invalid(format!(
                    "mount name {:?} must start with /",
                    m.name
                )));
            }
            if m.queue_size.is_some_and(|q| q < 1024) {
                return Err(ConfigError::Invalid(format!(
                    "mount {:?}: `queue-size` must be ≥ 1024",
                    m.name
                )));
            }
            glob::Pattern::new(&m.name).map_err(|e| {
                ConfigError::Invalid(format!(
                    "mount name {:?} is not a valid pattern: {e}",
                    m.name
                ))
            })?;
        }
        for m in &self.mount {
            if m.file.is_some() && m.name.contains(['*', '?', '[']) {
                return Err(ConfigError::Invalid(format!(
                    "mount {:?}: `file` needs an exact mount name, not a pattern",
                    m.name
                )));
            }
            if let Some(f) = &m.fallback_mount {
                if !f.starts_with('/') {
                    return Err(ConfigError::Invalid(format!(
                        "mount {:?}: `fallback-mount` {f:?} must start with /",
                        m.name
                    )));
                }
            }
        }
        for r in &self.relay {
            if r.server.is_empty() || !r.mount.starts_with('/') || !r.local().starts_with('/') {
                return Err(ConfigError::Invalid(format!(
                    "relay {}:{}{}: needs a server and mounts starting with /",
                    r.server, r.port, r.mount
                )));
            }
        }
        if let Some(m) = &self.shoutcast_mount {
            if !m.starts_with('/') {
                return Err(ConfigError::Invalid(
                    "`shoutcast-mount` must start with /".into(),
                ));
            }
        }
        for cidr in &self.paths.x_forwarded_for {
            parse_cidr(cidr).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "`paths.x-forwarded-for`: {cidr:?} is not an address or CIDR range"
                ))
            })?;
        }
        for cidr in &self.paths.proxy_protocol_from {
            parse_cidr(cidr).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "`paths.proxy-protocol-from`: {cidr:?} is not an address or CIDR range"
                ))
            })?;
        }
        self.cluster.validate().map_err(ConfigError::Invalid)?;
        self.tls.validate().map_err(ConfigError::Invalid)?;
        if !self.demo_mount.starts_with('/') {
            return Err(ConfigError::Invalid(
                "`demo-mount` must start with /".into(),
            ));
        }
        Ok(())
    }

    /// Fills in missing passwords with random ones; returns which were generated, as
    /// `(what, password)` pairs to print at start-up.
    pub fn generate_missing_passwords(&mut self) -> Vec<(String, String)> {
        let mut made = Vec::new();
        let admin_user = self.admin_user().to_owned();
        let auth = &mut self.authentication;
        if auth.source_password.is_none() {
            let p = random_password();
            made.push(("source password (user `source`)".to_owned(), p.clone()));
            auth.source_password = Some(p);
        }
        if auth.admin_password.is_none() {
            let p = random_password();
            made.push((format!("admin password (user `{admin_user}`)"), p.clone()));
            auth.admin_password = Some(p);
        }
        made
    }

    /// How long a listener of mount `name` may stay: the shorter of the mount's
    /// `max-listener-duration` (seconds, 0 for none; Icecast 2.4.4 `<max-listener-duration>`)
    /// and `auth_limit`, the time limit URL authentication gave it (`icecast-auth-timelimit`);
    /// `None` for no limit. For ICY listeners, HLS sessions and WHEP viewers alike.
    pub fn listening_limit(
        &self,
        name: &str,
        auth_limit: Option<std::time::Duration>,
    ) -> Option<std::time::Duration> {
        let duration = self
            .mount_for(name)
            .and_then(|m| m.max_listener_duration)
            .filter(|&s| s > 0)
            .map(std::time::Duration::from_secs);
        match (duration, auth_limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The settings for mount `name`: the first `[[mount]]` whose pattern matches.
    pub fn mount_for(&self, name: &str) -> Option<&MountConfig> {
        self.mount
            .iter()
            .find(|m| m.name == name || glob::Pattern::new(&m.name).is_ok_and(|p| p.matches(name)))
    }

    /// The HLS settings of mount `name` (`config/hls.rs`); `None` when HLS is off for it.
    pub fn hls_for(&self, name: &str) -> Option<HlsSettings> {
        let m = self.mount_for(name);
        hls::settings(
            &self.hls,
            hls::MountHls {
                on: m.and_then(|m| m.hls),
                segment_seconds: m.and_then(|m| m.hls_segment_seconds),
                window: m.and_then(|m| m.hls_window),
                playlists: m.and_then(|m| m.hls_playlists),
                aac_segments: m.and_then(|m| m.hls_aac_segments),
                low_latency: m.and_then(|m| m.hls_low_latency),
            },
        )
    }

    /// The secure-link secret of mount `name`'s HLS tokens (its `hls-secure-link-secret`, else
    /// `[hls] secure-link-secret`) and how long a token stays valid (seconds); `None`: tokens
    /// are not signed.
    pub fn hls_secure_link(&self, name: &str) -> Option<(&str, u64)> {
        self.mount_for(name)
            .and_then(|m| m.hls_secure_link_secret.as_deref())
            .or(self.hls.secure_link_secret.as_deref())
            .map(|s| (s, self.hls.secure_link_seconds))
    }

    /// The fallback of mount `name` in the configuration, if any.
    pub fn fallback_for(&self, name: &str) -> Option<&str> {
        self.mount_for(name)?.fallback_mount.as_deref()
    }

    /// Burst-size and queue-size of mount `name` in bytes: its `[[mount]]` values, else
    /// `[limits]`.
    pub fn burst_and_queue(&self, name: &str) -> (usize, usize) {
        let m = self.mount_for(name);
        (
            m.and_then(|m| m.burst_size)
                .unwrap_or(self.limits.burst_size),
            m.and_then(|m| m.queue_size)
                .unwrap_or(self.limits.queue_size),
        )
    }

    /// Extra listener response headers for mount `name`: the global `http-headers`, then the
    /// mount's (Icecast `<http-headers>`).
    pub fn http_headers_for(&self, name: &str) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .http_headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        if let Some(m) = self.mount_for(name) {
            v.extend(
                m.http_headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone())),
            );
        }
        v
    }

    /// The source user and password for mount `name`: the mount's own, else user `source` with
    /// the global source password. `None` when no password is configured: then no source is
    /// accepted (an empty password is never a valid one).
    pub fn source_credentials(&self, name: &str) -> Option<(String, String)> {
        let m = self.mount_for(name);
        let user = m
            .and_then(|m| m.username.clone())
            .unwrap_or_else(|| "source".to_owned());
        let pass = m
            .and_then(|m| m.password.clone())
            .or_else(|| self.authentication.source_password.clone())
            .filter(|p| !p.is_empty())?;
        Some((user, pass))
    }

    /// The mount SHOUTcast sources feed unless their password line names one:
    /// `shoutcast-mount`, else `/stream` (Icecast 2.4.4's default).
    pub fn shoutcast_default_mount(&self) -> &str {
        self.shoutcast_mount
            .as_deref()
            .unwrap_or(throng_proto::shoutcast::DEFAULT_MOUNT)
    }

    /// Relay user name (default `relay`).
    pub fn relay_user(&self) -> &str {
        self.authentication.relay_user.as_deref().unwrap_or("relay")
    }

    /// Gives every `[[relay]]` with `username = "edge"` and no `password` the cluster secret
    /// (`[cluster] secret`) as its password: an edge relays its origin with the credentials
    /// the origin never redirects (`cluster/redirect.rs`), and the secret needs to be written
    /// (or passed as `THRONG_CLUSTER_SECRET`) once.
    pub fn edge_relays_use_cluster_secret(&mut self) {
        let Some(secret) = self.cluster.secret.clone() else {
            return;
        };
        for r in &mut self.relay {
            if r.username.as_deref() == Some("edge") && r.password.is_none() {
                r.password = Some(secret.clone());
            }
        }
    }

    /// The failed-login throttle's settings (`[authentication]` `max-failed-logins`,
    /// `failed-login-window`, `failed-login-block`; defaults 10 failures in 60 s, 60 s block).
    pub fn login_throttle(&self) -> crate::config::LoginThrottle {
        let a = &self.authentication;
        LoginThrottle {
            max_failures: a.max_failed_logins.unwrap_or(10),
            window: Duration::from_secs(a.failed_login_window.unwrap_or(60).max(1)),
            block: Duration::from_secs(a.failed_login_block.unwrap_or(60).max(1)),
        }
    }

    /// Admin user name.
    pub fn admin_user(&self) -> &str {
        self.authentication.admin_user.as_deref().unwrap_or("admin")
    }

    /// Header timeout.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.header_timeout.max(1))
    }

    /// Body timeout (`[limits] body-timeout`, at least 1 s).
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.body_timeout.max(1))
    }

    /// Source timeout.
    pub fn source_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.source_timeout.max(1))
    }
}

/// A random 20-character alphanumeric password.
pub fn random_password() -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), 20)
}

#[cfg(test)]
mod tests {
    #[test]
    fn legacy_titles_are_decoded_in_the_mount_charset() {
        // Valid UTF-8 is kept whatever the charset says.
        assert_eq!(
            decode_legacy_text("Café".as_bytes(), Some("ISO8859-1")),
            "Café"
        );
        assert_eq!(decode_legacy_text(b"Caf\xe9", Some("ISO8859-1")), "Café");
        assert_eq!(decode_legacy_text(b"Caf\xe9", None), "Café");
        // "Привет" in windows-1251: only the mount's charset reads it right.
        let cp1251 = b"\xcf\xf0\xe8\xe2\xe5\xf2";
        assert_eq!(decode_legacy_text(cp1251, Some("windows-1251")), "Привет");
        assert_ne!(decode_legacy_text(cp1251, None), "Привет");
        assert!(charset_encoding("ISO8859-1").is_some());
        assert!(charset_encoding("no-such-charset").is_none());
        let bad = Config::from_toml("[[mount]]\nname = \"/a\"\ncharset = \"klingon\"\n");
        assert!(bad.is_err());
    }

    #[test]
    fn aliases_match_exact_paths_and_fallback_names_lose_their_bitrate() {
        let p = Paths {
            alias: vec![Alias {
                source: "/".into(),
                destination: "/status.xsl".into(),
            }],
            ..Paths::default()
        };
        assert_eq!(p.resolve_alias("/"), "/status.xsl");
        assert_eq!(p.resolve_alias("/x"), "/x");
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        assert_eq!(
            webroot_file(w, "/fallback-[128].mp3"),
            w.join("fallback-[128].mp3")
        );
        std::fs::write(w.join("fallback-.mp3"), b"x").unwrap();
        assert_eq!(
            webroot_file(w, "/fallback-[128].mp3"),
            w.join("fallback-.mp3")
        );
        std::fs::write(w.join("fallback-[128].mp3"), b"x").unwrap();
        assert_eq!(
            webroot_file(w, "/fallback-[128].mp3"),
            w.join("fallback-[128].mp3")
        );
        assert_eq!(webroot_file(w, "/a-[x].mp3"), w.join("a-[x].mp3"));
    }

    use super::*;

    #[test]
    fn the_listening_limit_is_the_shorter_of_the_mounts_and_the_auths() {
        use std::time::Duration;
        let c =
            Config::from_toml("[[mount]]\nname = \"/a\"\nmax-listener-duration = 60\n").unwrap();
        assert_eq!(c.listening_limit("/a", None), Some(Duration::from_secs(60)));
        let auth = Some(Duration::from_secs(30));
        assert_eq!(c.listening_limit("/a", auth), auth);
        assert_eq!(
            c.listening_limit("/a", Some(Duration::from_secs(90))),
            Some(Duration::from_secs(60))
        );
        assert_eq!(c.listening_limit("/b", None), None);
        assert_eq!(c.listening_limit("/b", auth), auth);
    }

    #[test]
    fn webrtc_is_on_in_the_embedded_defaults_and_a_file_can_turn_it_off_or_move_it() {
        let http: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let at = |toml: &str| Config::from_toml(toml).unwrap().webrtc.udp_address(http);
        assert_eq!(Config::embedded().webrtc.udp_address(http), Some(http));
        assert_eq!(at(""), None, "a file without [webrtc]: off, as before");
        assert_eq!(
            at("[webrtc]\nenabled = true\n"),
            Some(http),
            "the HTTP port"
        );
        let moved: SocketAddr = "0.0.0.0:9443".parse().unwrap();
        assert_eq!(at("[webrtc]\nudp-listen = \"0.0.0.0:9443\"\n"), Some(moved));
        assert_eq!(
            at("[webrtc]\nenabled = true\nudp-listen = \"0.0.0.0:9443\"\n"),
            Some(moved)
        );
        assert_eq!(
            at("[webrtc]\nenabled = false\nudp-listen = \"0.0.0.0:9443\"\n"),
            None,
            "turned off"
        );
    }

    #[test]
    fn transcode_frame_ms_takes_opus_packet_times_of_20_to_80_ms_only() {
        let frame = |v: &str| Config::from_toml(&format!("[webrtc]\ntranscode-frame-ms = {v}\n"));
        for ok in [20, 40, 60, 80] {
            assert_eq!(
                frame(&ok.to_string()).unwrap().webrtc.transcode_frame_ms,
                Some(ok)
            );
        }
        for bad in [0, 10, 50, 100, 120] {
            let e = frame(&bad.to_string()).unwrap_err().to_string();
            assert!(e.contains("transcode-frame-ms"), "{bad}: {e}");
        }
        assert_eq!(
            Config::from_toml("").unwrap().webrtc.transcode_frame_ms,
            None
        );
    }

    #[test]
    fn defaults_follow_icecast() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.limits.queue_size, 512_000);
        assert_eq!(c.limits.burst_size, 65_536);
        assert_eq!(c.limits.header_timeout, 15);
        assert_eq!(c.limits.source_timeout, 10);
        assert_eq!(c.limits.sources, 16);
        assert!(!c.demo);
        assert!(Config::embedded().demo);
        assert_eq!(Config::embedded().webrtc.enabled, Some(true), "WebRTC on");
    }

    #[test]
    fn mounts_match_exact_and_wildcard() {
        let c = Config::from_toml(
            r#"
            listen = ["127.0.0.1:9000"]
            [limits]
            queue-size = 100000
            lag-policy = "skip"
            [[mount]]
            name = "/live.mp3"
            max-listeners = 5
            [[mount]]
            name = "/show-*"
            hidden = true
            "#,
        )
        .unwrap();
        assert_eq!(c.limits.lag_policy, LagPolicy::Skip);
        assert_eq!(c.mount_for("/live.mp3").unwrap().max_listeners, Some(5));
        assert!(c.mount_for("/show-1.ogg").unwrap().hidden);
        assert!(c.mount_for("/other").is_none());
    }

    #[test]
    fn mount_authentication_and_relays_parse() {
        let c = Config::from_toml(
            r#"
            [[mount]]
            name = "/a"
            authentication = { type = "htpasswd", filename = "/etc/throng/users" }
            [[mount]]
            name = "/b"
            fallback-mount = "/a"
            [mount.authentication]
            type = "url"
            listener-add = "http://127.0.0.1:9/add"
            [[relay]]
            server = "origin"
            mount = "/live"
            "#,
        )
        .unwrap();
        assert!(matches!(
            c.mount_for("/a").unwrap().authentication,
            Some(AuthConfig::Htpasswd { .. })
        ));
        match &c.mount_for("/b").unwrap().authentication {
            Some(AuthConfig::Url(u)) => {
                assert_eq!(u.listener_add.as_deref(), Some("http://127.0.0.1:9/add"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.fallback_for("/b"), Some("/a"));
        assert_eq!(c.relay[0].port, 8000);
        assert_eq!(c.relay[0].local(), "/live");
        assert!(Config::from_toml(
            "[[mount]]\nname = \"/x\"\nauthentication = { type = \"url\", bogus = 1 }"
        )
        .is_err());
    }

    #[test]
    fn rejects_unknown_keys_and_bad_mounts() {
        assert!(Config::from_toml("bogus = 1").is_err());
        assert!(Config::from_toml("[[mount]]\nname = \"live\"").is_err());
    }

    #[test]
    fn example_file_in_the_repo_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../throng.example.toml");
        let c = Config::from_file(&path).expect("throng.example.toml must match the schema");
        assert!(!c.mount.is_empty());
        assert!(
            c.authentication.source_password.is_none(),
            "no default password in the example"
        );
    }

    #[test]
    fn generates_passwords_never_defaults() {
        let mut c = Config::default();
        let made = c.generate_missing_passwords();
        assert_eq!(made.len(), 2);
        let p = c.authentication.source_password.unwrap();
        assert_eq!(p.len(), 20);
        assert_ne!(p, "hackme");
    }
}
