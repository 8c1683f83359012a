//! Import of an Icecast 2.4.4 `icecast.xml` into a Throng [`Config`] (`throng serve
//! --icecast-config` and `throng import-icecast`). The file is read the way Icecast 2.4.4
//! `cfgfile.c` reads it: elements in document order (a later element overrides an earlier one),
//! the defaults of `_set_defaults` for everything absent (port 8000, 256 clients, 16 sources,
//! queue-size 512000 bytes, burst-size 65536 bytes, header-timeout 15 s, source-timeout 10 s,
//! logs in `/usr/local/icecast/logs`), `type="default"` mounts merged into every normal mount
//! (`merge_mounts`) and also kept as a last wildcard mount for mounts without their own
//! (`config_find_mount`). Relative paths resolve against the XML file's directory (Icecast
//! uses its working directory, which Throng cannot know), or inside `<basedir>` when `<chroot>`
//! is on; log names resolve inside `<logdir>` and intros inside `<webroot>`, as Icecast does.
//!
//! Nothing is dropped silently: every element Throng does not carry over is listed in
//! [`Import::unsupported`] with its path (`icecast/directory/yp-url`) and why.

mod listen;
mod mounts;
mod relays;
mod sections;
mod tree;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::config::{Config, ConfigError, MountConfig};
use listen::{ip, legacy, Socket};
use mounts::{MountType, RawMount};
use tree::Element;

/// Errors importing an `icecast.xml`.
#[derive(Debug, Error)]
pub enum IcecastXmlError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not well-formed XML (the message gives the byte offset).
    #[error("malformed XML: {0}")]
    Xml(String),
    /// The document has no element at all.
    #[error("the document has no root element")]
    NoRoot,
    /// The root element is not `<icecast>` (Icecast refuses such a file too).
    #[error("the root element is <{0}>, not <icecast>")]
    NotIcecast(String),
    /// A value cannot be used, e.g. a number that is not one.
    #[error("{path}: {value:?} is not {expected}")]
    BadValue {
        /// Element path, e.g. `icecast/limits/clients`.
        path: String,
        /// The value as written.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// No listen socket is left (TLS sockets are not supported).
    #[error("no usable <listen-socket>: Throng would not listen anywhere")]
    NoListenSocket,
    /// The resulting configuration is invalid (e.g. a queue-size below 1024 bytes).
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// The result of an import: the equivalent configuration, and what it leaves out.
#[derive(Debug, Clone)]
pub struct Import {
    /// The configuration, validated. Passwords absent from the XML stay unset (generated at
    /// start-up, as always in Throng).
    pub config: Config,
    /// Every element or attribute not carried over: in document order, then those that
    /// depend on the whole file (top-level port, basedir, master, shoutcast settings).
    pub unsupported: Vec<Unsupported>,
}

/// One element (or attribute) of the XML that the imported configuration does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Slash-separated path from the root, e.g. `icecast/directory/yp-url`; an attribute ends
    /// in `/@name`, an `<option>` in `[@name=...]`.
    pub path: String,
    /// The element or attribute name (the last segment of `path`).
    pub name: String,
    /// What it belongs to, e.g. `mount /live.mp3`, when the path alone does not tell.
    pub context: Option<String>,
    /// Why it is left out.
    pub kind: UnsupportedKind,
    /// What it does in Icecast, or what to use in Throng instead.
    pub note: String,
}

/// Why an element is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsupportedKind {
    /// Icecast 2.4.4 acts on it; Throng has no equivalent.
    NotSupported,
    /// Icecast 2.4.4 does nothing with it either (parsed but unused, or discarded as invalid).
    IgnoredByIcecast,
    /// Not an Icecast 2.4.4 element (a typo, or another server's extension); Icecast ignores it.
    Unknown,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(c) = &self.context {
            write!(f, " ({c})")?;
        }
        let kind = match self.kind {
            UnsupportedKind::NotSupported => "not supported",
            UnsupportedKind::IgnoredByIcecast => "ignored by Icecast too",
            UnsupportedKind::Unknown => "unknown to Icecast 2.4.4",
        };
        write!(f, ": {kind}: {}", self.note)
    }
}

/// Reads and imports the file at `path`; relative paths inside resolve against its directory.
///
/// Errors: [`IcecastXmlError::Read`], then as [`parse`].
pub fn from_file(path: &Path) -> Result<Import, IcecastXmlError> {
    let text = std::fs::read_to_string(path).map_err(|source| IcecastXmlError::Read {
        path: path.to_owned(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    parse(&text, &dir)
}

/// Imports the text of an `icecast.xml` (pure: no file is touched). `base_dir` is the
/// directory relative paths resolve against (the XML file's own).
///
/// Errors: malformed XML, a root other than `<icecast>`, a value that is not a number where
/// Icecast expects one, no usable listen socket, or a configuration that fails
/// [`Config::validate`].
pub fn parse(xml: &str, base_dir: &Path) -> Result<Import, IcecastXmlError> {
    let root = tree::parse(xml)?;
    if root.name != "icecast" {
        return Err(IcecastXmlError::NotIcecast(root.name));
    }
    let mut imp = Importer::new(base_dir);
    imp.root(&root)?;
    imp.finish()
}

/// Turns paths of the XML into paths of this machine: relative ones against the XML file's
/// directory, and every one inside `basedir` when Icecast would chroot there.
#[derive(Debug, Clone)]
struct Resolver {
    base: PathBuf,
    chroot: Option<PathBuf>,
}

impl Resolver {
    fn path(&self, raw: &str) -> PathBuf {
        match &self.chroot {
            Some(root) => root.join(raw.trim_start_matches('/')),
            None => self.base.join(raw),
        }
    }
}

/// Import state: the configuration being built, values that can only be resolved once the
/// whole file is read, and the report.
struct Importer<'a> {
    base: &'a Path,
    config: Config,
    report: Vec<Unsupported>,
    legacy_socket: Option<Socket>,
    legacy_paths: Vec<String>,
    /// Whether any `<listen-socket>` was read (TLS ones included, though left out).
    any_listen_socket: bool,
    sockets: Vec<Socket>,
    shoutcast_mount: Option<(String, String)>,
    relays_on_demand: bool,
    master_server: Option<String>,
    master_port: u16,
    master_username: Option<String>,
    master_password: Option<String>,
    master_interval: u64,
    master_paths: Vec<String>,
    chroot: bool,
    basedir: Option<(String, String)>,
    logdir: String,
    webroot: String,
    deny_ip: Option<String>,
    allow_ip: Option<String>,
    deny_agents: Option<String>,
    accesslog: String,
    errorlog: String,
    mounts: Vec<RawMount>,
}

impl<'a> Importer<'a> {
    fn new(base: &'a Path) -> Importer<'a> {
        let mut config = Config::default();
        // Icecast 2.4.4 `_set_defaults` where it differs from Throng's own defaults.
        config.limits.clients = 256;
        Importer {
            base,
            config,
            report: Vec::new(),
            legacy_socket: None,
            legacy_paths: Vec::new(),
            any_listen_socket: false,
            sockets: Vec::new(),
            shoutcast_mount: None,
            relays_on_demand: false,
            master_server: None,
            master_port: 0,
            master_username: None,
            master_password: None,
            master_interval: 120,
            master_paths: Vec::new(),
            chroot: false,
            basedir: None,
            logdir: "/usr/local/icecast/logs".into(),
            webroot: "/usr/local/icecast/webroot".into(),
            deny_ip: None,
            allow_ip: None,
            deny_agents: None,
            accesslog: "access.log".into(),
            errorlog: "error.log".into(),
            mounts: Vec::new(),
        }
    }

    /// Adds an entry to the report.
    fn report(
        &mut self,
        path: &str,
        context: Option<&str>,
        kind: UnsupportedKind,
        note: impl Into<String>,
    ) {
        let name = path.rsplit('/').next().unwrap_or(path);
        let name = name.split('[').next().unwrap_or(name);
        self.report.push(Unsupported {
            path: path.to_owned(),
            name: name.trim_start_matches('@').to_owned(),
            context: context.map(str::to_owned),
            kind,
            note: note.into(),
        });
    }

    fn unknown(&mut self, path: &str, context: Option<&str>) {
        self.report(
            path,
            context,
            UnsupportedKind::Unknown,
            "not an Icecast 2.4.4 setting here",
        );
    }

    /// An integer as Icecast's `atoi` reads it, but strict: surrounding blanks are allowed,
    /// anything else that is not a number is an error. An empty element is reported and
    /// yields `None` (Icecast warns or reads NULL).
    fn int(
        &mut self,
        path: &str,
        el: &Element,
        context: Option<&str>,
    ) -> Result<Option<i64>, IcecastXmlError> {
        let Some(text) = el.text() else {
            self.report(
                path,
                context,
                UnsupportedKind::IgnoredByIcecast,
                "empty value",
            );
            return Ok(None);
        };
        text.trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| IcecastXmlError::BadValue {
                path: path.to_owned(),
                value: text.to_owned(),
                expected: "an integer",
            })
    }

    /// A non-negative integer converted to `T`.
    fn unsigned<T: TryFrom<i64>>(
        &mut self,
        path: &str,
        el: &Element,
        expected: &'static str,
    ) -> Result<Option<T>, IcecastXmlError> {
        match self.int(path, el, None)? {
            None => Ok(None),
            Some(v) => T::try_from(v)
                .map(Some)
                .map_err(|_| IcecastXmlError::BadValue {
                    path: path.to_owned(),
                    value: el.text().unwrap_or_default().to_owned(),
                    expected,
                }),
        }
    }

    /// A flag: an integer (non-zero is on, as Icecast's `atoi`), or `true`/`false`/`yes`/`no`/
    /// `on`/`off` as later Icecast versions accept.
    fn flag(
        &mut self,
        path: &str,
        el: &Element,
        context: Option<&str>,
    ) -> Result<Option<bool>, IcecastXmlError> {
        if let Some(word) = el.text().map(|t| t.trim().to_ascii_lowercase()) {
            match word.as_str() {
                "true" | "yes" | "on" => return Ok(Some(true)),
                "false" | "no" | "off" => return Ok(Some(false)),
                _ => {}
            }
        }
        Ok(self.int(path, el, context)?.map(|v| v != 0))
    }

    /// The text of a string element, `None` when empty (Icecast then holds NULL, i.e. unset).
    fn string(el: &Element) -> Option<String> {
        el.text().map(str::to_owned)
    }

    /// `<icecast>`'s children, as `_parse_root`.
    fn root(&mut self, root: &Element) -> Result<(), IcecastXmlError> {
        for el in &root.children {
            let path = format!("icecast/{}", el.name);
            let p = path.as_str();
            match el.name.as_str() {
                "location" => {
                    if let Some(v) = Self::string(el) {
                        self.config.location = v;
                    }
                }
                "admin" => {
                    if let Some(v) = Self::string(el) {
                        self.config.admin_email = v;
                    }
                }
                "hostname" => {
                    if let Some(v) = Self::string(el) {
                        self.config.hostname = v;
                    }
                }
                "server-id" => {
                    if let Some(v) = Self::string(el) {
                        self.config.server_id = v;
                    }
                }
                "authentication" => self.authentication(p, el)?,
                // The pre-2.0 location, still read by 2.4.4.
                "source-password" => self.config.authentication.source_password = Self::string(el),
                "limits" => self.limits(p, el)?,
                "listen-socket" => self.listen_socket(p, el)?,
                "port" => {
                    if let Some(port) = self.unsigned::<u16>(p, el, "a port number")? {
                        self.legacy_socket.get_or_insert_with(|| legacy(p)).port = port;
                        self.legacy_paths.push(path.clone());
                    }
                }
                "bind-address" => {
                    let bind = Some(ip(p, el)?);
                    self.legacy_socket.get_or_insert_with(|| legacy(p)).bind = bind;
                    self.legacy_paths.push(path.clone());
                }
                "shoutcast-mount" => {
                    self.shoutcast_mount = Self::string(el).map(|m| (m, path.clone()))
                }
                "http-headers" => {
                    let mut h = self.http_headers(p, el, None);
                    self.config.http_headers.append(&mut h);
                }
                "relay" => self.relay(p, el)?,
                "mount" => {
                    if let Some(m) = self.mount(p, el)? {
                        self.mounts.push(m);
                    }
                }
                "master-server" => {
                    self.master_server = Self::string(el);
                    self.master_paths.push(path.clone());
                }
                "master-server-port" => {
                    self.master_port = self.unsigned(p, el, "a port number")?.unwrap_or(0);
                    self.master_paths.push(path.clone());
                }
                "master-username" => {
                    self.master_username = Self::string(el);
                    self.master_paths.push(path.clone());
                }
                "master-password" => {
                    self.master_password = Self::string(el);
                    self.master_paths.push(path.clone());
                }
                "master-update-interval" => {
                    if let Some(v) = self.unsigned(p, el, "a number of seconds")? {
                        self.master_interval = v;
                    }
                }
                "relays-on-demand" => {
                    if let Some(v) = self.flag(p, el, None)? {
                        self.relays_on_demand = v;
                    }
                }
                "paths" => self.paths(p, el)?,
                "logging" => self.logging(p, el)?,
                "security" => self.security(p, el)?,
                "directory" => {
                    if el.children.is_empty() {
                        self.report(p, None, UnsupportedKind::NotSupported, "YP directories");
                    }
                    for c in &el.children {
                        self.report(
                            &format!("{p}/{}", c.name),
                            None,
                            UnsupportedKind::NotSupported,
                            "YP directory listing is not supported",
                        );
                    }
                }
                "fileserve" => {
                    if self.flag(p, el, None)? == Some(true) {
                        self.report(
                            p,
                            None,
                            UnsupportedKind::NotSupported,
                            "Throng serves no static files from the webroot (its status pages \
                             and status JSON are built in); webroot files are used as \
                             fallback files only",
                        );
                    }
                }
                "icelogin" => {
                    if self.flag(p, el, None)? == Some(true) {
                        self.report(
                            p,
                            None,
                            UnsupportedKind::NotSupported,
                            "the pre-HTTP ice login of very old source clients",
                        );
                    }
                }
                "mime-types" => self.report(
                    p,
                    None,
                    UnsupportedKind::NotSupported,
                    "Throng serves no static files, so needs no MIME types file",
                ),
                _ => self.unknown(p, None),
            }
        }
        Ok(())
    }

    /// Resolves everything that depends on the whole file and validates the result.
    fn finish(mut self) -> Result<Import, IcecastXmlError> {
        self.finish_listen()?;
        self.finish_master();
        let chroot = if self.chroot {
            let raw = self
                .basedir
                .as_ref()
                .map_or("/usr/local/icecast", |(b, _)| b.as_str());
            Some(self.base.join(raw))
        } else {
            if let Some((_, p)) = self.basedir.take() {
                self.report(
                    &p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "Icecast uses basedir only with <chroot>1</chroot>",
                );
            }
            None
        };
        let resolver = Resolver {
            base: self.base.to_owned(),
            chroot,
        };
        let logdir = resolver.path(&self.logdir);
        let in_logdir = |name: &str| match name {
            "-" => "-".to_owned(),
            n => logdir.join(n.trim_start_matches('/')).display().to_string(),
        };
        self.config.logging.access_log = in_logdir(&self.accesslog);
        self.config.logging.error_log = in_logdir(&self.errorlog);
        let webroot = resolver.path(self.webroot.trim_end_matches('/'));
        let paths = &mut self.config.paths;
        paths.webroot = Some(webroot.clone());
        paths.deny_ip = self.deny_ip.as_deref().map(|p| resolver.path(p));
        paths.allow_ip = self.allow_ip.as_deref().map(|p| resolver.path(p));
        paths.deny_agents = self.deny_agents.as_deref().map(|p| resolver.path(p));

        // Normal mounts with the matching default merged in, then the defaults themselves.
        let (normal, defaults): (Vec<RawMount>, Vec<RawMount>) = self
            .mounts
            .drain(..)
            .partition(|m| m.kind == MountType::Normal);
        let mut out: Vec<MountConfig> = Vec::new();
        for mut m in normal {
            let name = m.name.clone().unwrap_or_default();
            if let Some(d) = defaults.iter().find(|d| d.default_applies_to(&name)) {
                m.merge_default(d);
            }
            out.push(m.to_config(&resolver, &webroot));
        }
        out.extend(defaults.iter().map(|d| d.to_config(&resolver, &webroot)));
        self.config.mount = out;

        self.config.validate()?;
        Ok(Import {
            config: self.config,
            unsupported: self.report,
        })
    }
}
