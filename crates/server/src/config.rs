//! Server configuration: the TOML file (`throng serve --config throng.toml`), its defaults, and
//! per-mount settings matched by exact name or wildcard.
//!
//! Defaults follow Icecast 2.4.4 `cfgfile.c:_set_defaults` where Icecast has one (queue-size
//! 512000 bytes, burst-size 65536 bytes, header-timeout 15 s, source-timeout 10 s, sources 16,
//! metaint 16000 bytes), except that passwords have no well-known default: a missing password is
//! generated at start-up and printed. See `throng.example.toml` for every key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::distributions::{Alphanumeric, DistString};
use serde::Deserialize;
use thiserror::Error;

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
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
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
    /// `Server:` header and `server_id` in the status JSON.
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
    pub mount: Vec<MountConfig>,
}

/// `[limits]`: sizes in bytes, timeouts in seconds.
#[derive(Debug, Clone, Deserialize)]
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
}

/// What to do with a listener that lags more than queue-size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LagPolicy {
    /// Disconnect it ("fallen too far behind"), as Icecast 2.4.4.
    Drop,
    /// Move it to the burst point of the live stream.
    Skip,
}

/// `[authentication]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Authentication {
    /// Password of user `source` for every mount without its own; generated when absent.
    pub source_password: Option<String>,
    /// Admin user name (default `admin`).
    pub admin_user: Option<String>,
    /// Admin password; generated when absent.
    pub admin_password: Option<String>,
}

/// `[logging]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Logging {
    /// Access log (Combined Log Format plus duration): a file path, `-` for standard output, or
    /// empty to disable. Default `-`.
    pub access_log: String,
}

/// `[[mount]]`: settings for mounts whose name matches `name` (exact or a glob like `/live*`).
#[derive(Debug, Clone, Deserialize, Default)]
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
    pub hidden: bool,
    /// Per-mount queue-size in bytes.
    pub queue_size: Option<usize>,
    /// Per-mount burst-size in bytes.
    pub burst_size: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec!["127.0.0.1:8000".parse().expect("literal address")],
            hostname: "localhost".into(),
            location: "Earth".into(),
            admin_email: "icemaster@localhost".into(),
            server_id: format!("Throng {}", env!("CARGO_PKG_VERSION")),
            workers: 0,
            demo: false,
            demo_mount: "/demo.mp3".into(),
            limits: Limits::default(),
            authentication: Authentication::default(),
            logging: Logging::default(),
            mount: Vec::new(),
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
            source_timeout: 10,
            write_interval_ms: 1000,
            lag_policy: LagPolicy::Drop,
            metaint: throng_proto::icy::DEFAULT_METAINT,
            listener_sndbuf: 0,
        }
    }
}

impl Default for Logging {
    fn default() -> Self {
        Logging {
            access_log: "-".into(),
        }
    }
}

impl Config {
    /// The embedded defaults of `throng serve` with no arguments: `127.0.0.1:8000` and the demo.
    pub fn embedded() -> Config {
        Config {
            demo: true,
            ..Config::default()
        }
    }

    /// Reads and validates a TOML file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { source, .. } => ConfigError::Parse {
                path: path.to_owned(),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates TOML text.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: PathBuf::new(),
            source,
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges and mount names.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() {
            return Err(ConfigError::Invalid("`listen` is empty".into()));
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

    /// The settings for mount `name`: the first `[[mount]]` whose pattern matches.
    pub fn mount_for(&self, name: &str) -> Option<&MountConfig> {
        self.mount
            .iter()
            .find(|m| m.name == name || glob::Pattern::new(&m.name).is_ok_and(|p| p.matches(name)))
    }

    /// Admin user name.
    pub fn admin_user(&self) -> &str {
        self.authentication.admin_user.as_deref().unwrap_or("admin")
    }

    /// Header timeout.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.header_timeout.max(1))
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
    use super::*;

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
