//! Where the running configuration comes from ([`ConfigSource`]): the embedded defaults, a TOML
//! file (`-c`) or an Icecast `icecast.xml` (`--icecast-config`), the command-line overrides
//! (`--listen`, `--source-password`, `--admin-password`) put over it, the file checks of
//! `check.rs`, and the passwords generated once and kept in a state file. `throng serve` loads
//! it at start and the server loads the same source again on every reload (SIGHUP, admin
//! `reloadconfig`), so a start and a reload can never read the configuration differently.
//!
//! Generated passwords: a password the configuration lacks (source, admin) is generated once,
//! written to `STATE_DIR/passwords.toml` (mode 0600, its directory 0700) and read back at every
//! later start and reload, so an encoder keeps working across restarts. The state directory is
//! `--state-dir`/`THRONG_STATE_DIR`, else `[paths] state-dir`, else
//! `$XDG_STATE_HOME/throng`, else `$HOME/.local/state/throng` (the XDG Base Directory
//! specification's default for state data). The audience ledger's default database,
//! `sqlite://STATE_DIR/ledger.db`, lives there too.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::check::{check, Problem};
use crate::config::{default_passwords, icecast_xml};
use crate::config::{random_password, Config, ConfigError};

/// Errors loading a configuration ([`ConfigSource::read`], [`ConfigSource::load`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The TOML file cannot be read, parsed or validated.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An Icecast `icecast.xml` could not be imported.
    #[error("cannot import {path}: {message}")]
    Import {
        /// The file.
        path: PathBuf,
        /// Why (the import error).
        message: String,
    },
    /// Files or directories the configuration names are missing or unreadable
    /// ([`check`]); one `key: problem` line each.
    #[error("{} problem(s) in the configuration:\n  {}", .0.len(), problem_lines(.0).join("\n  "))]
    Problems(Vec<Problem>),
    /// The state file of generated passwords cannot be read or written.
    #[error("state file {path}: {message}")]
    State {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// The configuration file of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigFile {
    /// No file: [`Config::embedded`] (the demo on `127.0.0.1:8000`).
    Embedded,
    /// A Throng TOML file.
    Toml(PathBuf),
    /// An Icecast 2.4 `icecast.xml`, imported at each load.
    IcecastXml(PathBuf),
}

impl ConfigFile {
    /// The file's path, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ConfigFile::Embedded => None,
            ConfigFile::Toml(p) | ConfigFile::IcecastXml(p) => Some(p),
        }
    }
}

impl std::fmt::Display for ConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path() {
            Some(p) => write!(f, "{}", p.display()),
            None => f.write_str("the embedded configuration"),
        }
    }
}

/// Command-line values put over the file's at every load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen`: replaces every `listen` of the file when not empty.
    pub listen: Vec<SocketAddr>,
    /// `--source-password`.
    pub source_password: Option<String>,
    /// `--admin-password`.
    pub admin_password: Option<String>,
    /// `--tls-listen`: replaces `[tls] listen` of the file when not empty.
    pub tls_listen: Vec<SocketAddr>,
    /// `--tls-cert`: with `--tls-key`, replaces the file's certificates.
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key`: the key of `--tls-cert`.
    pub tls_key: Option<PathBuf>,
    /// `--public-url` (`THRONG_PUBLIC_URL`): `[cluster] public-url`, e.g. an edge pod's own
    /// address from the Kubernetes downward API.
    pub public_url: Option<String>,
    /// `--cluster-secret` (`THRONG_CLUSTER_SECRET`): `[cluster] secret`, from a Secret rather
    /// than the file.
    pub cluster_secret: Option<String>,
    /// `--ledger-database` (`THRONG_LEDGER_DATABASE`): `[ledger] database` (a `postgres://`
    /// URL carries a password).
    pub ledger_database: Option<String>,
    /// `--webrtc-public-address` (`THRONG_WEBRTC_PUBLIC_ADDRESS`): `[webrtc] public-address`,
    /// the ICE candidate's address (a pod's or its node's IP).
    pub webrtc_public_address: Option<std::net::IpAddr>,
}

/// Everything a server needs to (re)build its configuration: the file, the command-line
/// overrides and the state directory of generated passwords.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    /// The configuration file.
    pub file: ConfigFile,
    /// Command-line overrides.
    pub overrides: Overrides,
    /// `--state-dir` / `THRONG_STATE_DIR`: over `[paths] state-dir` and the XDG default.
    pub state_dir: Option<PathBuf>,
    /// Passwords generated by an earlier load of this source, used when the state file cannot
    /// be read back (so a reload never makes new ones).
    remembered: StoredPasswords,
    /// A fingerprint of the file's bytes and the warnings of the last load, so a reload of an
    /// unchanged file does not repeat them ([`Loaded::warnings_repeated`]).
    last_warned: Option<u64>,
}

/// A loaded configuration and what the operator should be told about it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration, overrides applied and every password filled in.
    pub config: Config,
    /// Warnings (an imported `icecast.xml`'s unsupported elements, well-known default
    /// passwords), one line each.
    pub warnings: Vec<String>,
    /// Whether the same warnings came from the same file bytes at the previous load of this
    /// source: a reload logs them once per change of the file, not at every SIGHUP.
    pub warnings_repeated: bool,
    /// Passwords generated by this load, as `(what, password)` pairs to print once.
    pub generated: Vec<(String, String)>,
    /// The state file holding generated passwords, when one is used.
    pub state_file: Option<PathBuf>,
}

impl LoadError {
    /// The error on one line (for a log line or an admin reply): the problems of
    /// [`LoadError::Problems`] joined by `; `.
    pub fn one_line(&self) -> String {
        match self {
            LoadError::Problems(p) => problem_lines(p).join("; "),
            other => other.to_string().replace('\n', " "),
        }
    }
}

/// The contents of `passwords.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct StoredPasswords {
    /// Password of user `source`.
    source_password: Option<String>,
    /// Admin password.
    admin_password: Option<String>,
}

/// Name of the audience ledger's default SQLite file in the state directory.
pub const LEDGER_FILE: &str = "ledger.db";

/// Name of the state file in the state directory.
pub const PASSWORDS_FILE: &str = "passwords.toml";

impl ConfigSource {
    /// A source reading `file` with `overrides`; `state_dir` as `--state-dir`.
    pub fn new(file: ConfigFile, overrides: Overrides, state_dir: Option<PathBuf>) -> ConfigSource {
        ConfigSource {
            file,
            overrides,
            state_dir,
            remembered: StoredPasswords::default(),
            last_warned: None,
        }
    }

    /// Parses and validates the file and applies the overrides, touching nothing else (no
    /// file checks, no passwords). Returns the configuration and its warnings.
    ///
    /// Errors: [`LoadError::Config`] (a file that cannot be read, parsed or validated) and
    /// [`LoadError::Import`] for an `icecast.xml` that cannot be imported.
    pub fn read(&self) -> Result<(Config, Vec<String>), LoadError> {
        let (mut config, warnings) = match &self.file {
            ConfigFile::Embedded => (Config::embedded(), Vec::new()),
            // Validated below, once the overrides are applied.
            ConfigFile::Toml(path) => (Config::parse_file(path)?, Vec::new()),
            ConfigFile::IcecastXml(path) => {
                let import = icecast_xml::from_file(path).map_err(|e| LoadError::Import {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                let mut warnings: Vec<String> = import
                    .unsupported
                    .iter()
                    .filter(|u| u.warns())
                    .map(|u| format!("{}: {u}", path.display()))
                    .collect();
                let mut config = import.config;
                // Icecast starts without its webroot (it answers 404 from it), and Throng only
                // looks fallback files and intros up there: a webroot that is not there is
                // left out with a warning (an intro named in it is still reported missing).
                if let Some(w) = config.paths.webroot.take() {
                    if w.is_dir() {
                        config.paths.webroot = Some(w);
                    } else {
                        warnings.push(format!(
                            "{}: <webroot> {} is not a directory: no fallback file can play from it",
                            path.display(),
                            w.display()
                        ));
                    }
                }
                (config, warnings)
            }
        };
        let o = &self.overrides;
        if !o.listen.is_empty() {
            config.listen = o.listen.clone();
        }
        if !o.tls_listen.is_empty() {
            config.tls.listen = o.tls_listen.clone();
        }
        if let (Some(cert), Some(key)) = (&o.tls_cert, &o.tls_key) {
            config.tls.certificate = vec![crate::config::tls::CertificateFiles {
                cert: cert.clone(),
                key: key.clone(),
            }];
        }
        if let Some(p) = &o.source_password {
            config.authentication.source_password = Some(p.clone());
        }
        if let Some(p) = &o.admin_password {
            config.authentication.admin_password = Some(p.clone());
        }
        if let Some(u) = &o.public_url {
            config.cluster.public_url = Some(u.clone());
        }
        if let Some(s) = &o.cluster_secret {
            config.cluster.secret = Some(s.clone());
        }
        if let Some(d) = &o.ledger_database {
            config.ledger.database = Some(d.clone());
        }
        if let Some(a) = o.webrtc_public_address {
            config.webrtc.public_address = Some(a);
        }
        config.edge_relays_use_cluster_secret();
        config.validate()?;
        let mut warnings = warnings;
        warnings.extend(
            default_passwords::warnings(&config)
                .into_iter()
                .map(|w| format!("{}: {w}", self.file)),
        );
        Ok((config, warnings))
    }

    /// Everything a start or a reload does before using a configuration: [`ConfigSource::read`],
    /// the file checks of [`check`], then missing passwords taken from the state file or
    /// generated once and stored there. Remembers generated passwords for later loads.
    ///
    /// Errors: as [`ConfigSource::read`]; [`LoadError::Problems`] listing every problem
    /// the checks found; [`LoadError::State`] when a password must be generated and the
    /// state file cannot be written (or no state directory is known).
    pub fn load(&mut self) -> Result<Loaded, LoadError> {
        let (mut config, warnings) = self.read()?;
        self.default_ledger(&mut config);
        let fingerprint = {
            use std::hash::{Hash as _, Hasher as _};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.file
                .path()
                .and_then(|p| std::fs::read(p).ok())
                .hash(&mut h);
            warnings.hash(&mut h);
            h.finish()
        };
        let warnings_repeated = self.last_warned == Some(fingerprint);
        let problems = check(&config);
        if !problems.is_empty() {
            return Err(LoadError::Problems(problems));
        }
        let auth = &config.authentication;
        if auth.source_password.is_some() && auth.admin_password.is_some() {
            self.last_warned = Some(fingerprint);
            return Ok(Loaded {
                config,
                warnings,
                warnings_repeated,
                generated: Vec::new(),
                state_file: None,
            });
        }
        let dir = self.state_dir(&config)?;
        let file = dir.join(PASSWORDS_FILE);
        let mut stored = read_passwords(&file)?.unwrap_or_else(|| self.remembered.clone());
        let mut generated = Vec::new();
        let admin_user = config.admin_user().to_owned();
        let auth = &mut config.authentication;
        let mut changed = false;
        for (slot, kept, what) in [
            (
                &mut auth.source_password,
                &mut stored.source_password,
                "source password (user `source`)".to_owned(),
            ),
            (
                &mut auth.admin_password,
                &mut stored.admin_password,
                format!("admin password (user `{admin_user}`)"),
            ),
        ] {
            if slot.is_some() {
                continue;
            }
            let p = match kept {
                Some(p) => p.clone(),
                None => {
                    let p = random_password();
                    *kept = Some(p.clone());
                    generated.push((what, p.clone()));
                    changed = true;
                    p
                }
            };
            *slot = Some(p);
        }
        if changed {
            write_passwords(&dir, &file, &stored)?;
        }
        self.remembered = stored;
        self.last_warned = Some(fingerprint);
        Ok(Loaded {
            config,
            warnings,
            warnings_repeated,
            generated,
            state_file: Some(file),
        })
    }

    /// Gives `config` the audience ledger's default database when it names none: the SQLite
    /// file [`LEDGER_FILE`] in the state directory (none when no state directory is known).
    pub fn default_ledger(&self, config: &mut Config) {
        if config.ledger.database.is_some() {
            return;
        }
        if let Ok(dir) = self.state_dir(config) {
            config.ledger.database = Some(format!("sqlite://{}", dir.join(LEDGER_FILE).display()));
        }
    }

    /// The state directory: `--state-dir`, else `[paths] state-dir`, else the XDG default.
    ///
    /// Errors: [`LoadError::State`] when none is set and neither `XDG_STATE_HOME` nor
    /// `HOME` is.
    pub fn state_dir(&self, config: &Config) -> Result<PathBuf, LoadError> {
        if let Some(d) = self.state_dir.clone().or(config.paths.state_dir.clone()) {
            return Ok(d);
        }
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(x) = env("XDG_STATE_HOME") {
            return Ok(x.join("throng"));
        }
        if let Some(h) = env("HOME") {
            return Ok(h.join(".local/state/throng"));
        }
        Err(LoadError::State {
            path: PathBuf::new(),
            message: "no state directory for generated passwords: set --state-dir, \
                      THRONG_STATE_DIR or [paths] state-dir, or configure the passwords"
                .into(),
        })
    }
}

/// The stored passwords, `None` when the file does not exist.
fn read_passwords(file: &Path) -> Result<Option<StoredPasswords>, LoadError> {
    match std::fs::read_to_string(file) {
        Ok(text) => toml::from_str(&text)
            .map(Some)
            .map_err(|e| LoadError::State {
                path: file.to_owned(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LoadError::State {
            path: file.to_owned(),
            message: e.to_string(),
        }),
    }
}

/// Writes `stored` to `file` (mode 0600) in `dir` (created with mode 0700), through a
/// temporary file renamed over it, so a crash never leaves half a file.
fn write_passwords(dir: &Path, file: &Path, stored: &StoredPasswords) -> Result<(), LoadError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let fail = |path: &Path, e: std::io::Error| LoadError::State {
        path: path.to_owned(),
        message: e.to_string(),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| fail(dir, e))?;
    let text = format!(
        "# Passwords generated by throng for settings the configuration leaves out.\n\
         # Delete this file to have new ones generated at the next start.\n{}",
        toml::to_string(stored).map_err(|e| LoadError::State {
            path: file.to_owned(),
            message: e.to_string(),
        })?
    );
    let tmp = file.with_extension("toml.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| fail(&tmp, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| fail(&tmp, e))?;
    std::fs::rename(&tmp, file).map_err(|e| fail(file, e))
}

/// Lines for an operator, one per problem (`key: message`).
pub fn problem_lines(problems: &[Problem]) -> Vec<String> {
    problems.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_stored_once_and_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let mut src = ConfigSource::new(
            ConfigFile::Embedded,
            Overrides {
                source_password: Some("given".into()),
                ..Overrides::default()
            },
            Some(state.clone()),
        );
        let first = src.load().unwrap();
        assert_eq!(
            first.generated.len(),
            1,
            "only the admin password is missing"
        );
        let admin = first.config.authentication.admin_password.clone().unwrap();
        assert_eq!(
            first.config.authentication.source_password.as_deref(),
            Some("given")
        );
        let file = state.join(PASSWORDS_FILE);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A new process (a new source) reads the admin password back; the source password,
        // given on the command line before, is generated now, once.
        let mut again = ConfigSource::new(ConfigFile::Embedded, Overrides::default(), Some(state));
        let second = again.load().unwrap();
        assert_eq!(second.generated.len(), 1, "{:?}", second.generated);
        assert!(second.generated[0].0.starts_with("source password"));
        assert_eq!(
            second.config.authentication.admin_password.as_deref(),
            Some(admin.as_str())
        );
        let third = again.load().unwrap();
        assert!(third.generated.is_empty());
        assert_eq!(
            third.config.authentication.source_password,
            second.config.authentication.source_password
        );
    }

    #[test]
    fn cluster_overrides_fill_the_edge_keys_and_its_relays_password() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edge.toml");
        std::fs::write(
            &path,
            "[cluster]\norigin = \"http://origin:8000\"\n\
             [[relay]]\nserver = \"origin\"\nmount = \"/live.mp3\"\nusername = \"edge\"\n\
             [[relay]]\nserver = \"other\"\nmount = \"/b.mp3\"\nusername = \"relay\"\n",
        )
        .unwrap();
        let src = ConfigSource::new(
            ConfigFile::Toml(path),
            Overrides {
                public_url: Some("http://10.0.0.7:8000".into()),
                cluster_secret: Some("s3cret".into()),
                ledger_database: Some("off".into()),
                webrtc_public_address: Some("10.0.0.7".parse().unwrap()),
                ..Overrides::default()
            },
            None,
        );
        let (c, _) = src.read().unwrap();
        assert_eq!(
            c.cluster.public_url.as_deref(),
            Some("http://10.0.0.7:8000")
        );
        assert_eq!(c.cluster.secret.as_deref(), Some("s3cret"));
        assert_eq!(c.ledger.database.as_deref(), Some("off"));
        assert_eq!(c.webrtc.public_address, Some("10.0.0.7".parse().unwrap()));
        // The edge's relay of its origin logs in with the secret; another relay is left as is.
        assert_eq!(c.relay[0].password.as_deref(), Some("s3cret"));
        assert_eq!(c.relay[1].password, None);
    }

    #[test]
    fn overrides_replace_the_file_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "listen = [\"127.0.0.1:9000\"]\n").unwrap();
        let src = ConfigSource::new(
            ConfigFile::Toml(path.clone()),
            Overrides {
                listen: vec!["127.0.0.1:0".parse().unwrap()],
                ..Overrides::default()
            },
            None,
        );
        let (c, _) = src.read().unwrap();
        assert_eq!(c.listen, vec!["127.0.0.1:0".parse().unwrap()]);
        std::fs::write(&path, "listen = [\n").unwrap();
        let e = src.read().unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}
