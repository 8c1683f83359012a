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

mod mounts;
mod tree;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::config::{
    parse_cidr, Config, ConfigError, HttpHeader, MasterConfig, MountConfig, RelayConfig,
};
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

/// A `<listen-socket>` (or the implicit one of a top-level `<port>`/`<bind-address>`).
#[derive(Debug, Clone)]
struct Socket {
    path: String,
    port: u16,
    bind: Option<IpAddr>,
    shoutcast_mount: Option<String>,
    shoutcast_compat: bool,
    sndbuf: Option<usize>,
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

    /// `<authentication>`, as `_parse_authentication`.
    fn authentication(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let auth = &mut self.config.authentication;
            match c.name.as_str() {
                "source-password" if c.attr("mount").is_some() => self.report(
                    &p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "Icecast refuses a mount= here (use <mount><password>)",
                ),
                "source-password" => auth.source_password = Self::string(c),
                "admin-user" => auth.admin_user = Self::string(c),
                "admin-password" => auth.admin_password = Self::string(c),
                "relay-user" => auth.relay_user = Self::string(c),
                "relay-password" => auth.relay_password = Self::string(c),
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<limits>`, as `_parse_limits` (plus Icecast-KH's `workers`).
    fn limits(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let p = p.as_str();
            const N: &str = "a non-negative integer";
            match c.name.as_str() {
                "clients" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.clients = v;
                    }
                }
                "sources" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.sources = v;
                    }
                }
                "queue-size" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.queue_size = v;
                    }
                }
                "burst-size" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.burst_size = v;
                    }
                }
                "burst-on-connect" => {
                    if self.flag(p, c, None)? == Some(false) {
                        self.config.limits.burst_size = 0;
                    }
                }
                "header-timeout" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.header_timeout = v;
                    }
                }
                "source-timeout" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.limits.source_timeout = v;
                    }
                }
                "workers" => {
                    if let Some(v) = self.unsigned(p, c, N)? {
                        self.config.workers = v;
                    }
                }
                "client-timeout" => self.report(
                    p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "parsed but never used by Icecast 2.4.4",
                ),
                "threadpool" => self.report(
                    p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "parsed but never used by Icecast 2.4.4",
                ),
                _ => self.unknown(p, None),
            }
        }
        Ok(())
    }

    /// `<listen-socket>`, as `_parse_listen_socket`.
    fn listen_socket(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        let mut s = Socket {
            path: path.to_owned(),
            port: 8000,
            bind: None,
            shoutcast_mount: None,
            shoutcast_compat: false,
            sndbuf: None,
        };
        let mut ssl = false;
        self.any_listen_socket = true;
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let p = p.as_str();
            match c.name.as_str() {
                "port" => {
                    if let Some(port) = self.unsigned(p, c, "a port number")? {
                        s.port = port;
                    }
                }
                "bind-address" => s.bind = Some(ip(p, c)?),
                "shoutcast-mount" => s.shoutcast_mount = Self::string(c),
                "shoutcast-compat" => s.shoutcast_compat = self.flag(p, c, None)? == Some(true),
                "ssl" => ssl = self.flag(p, c, None)? == Some(true),
                "so-sndbuf" => s.sndbuf = self.unsigned(p, c, "a size in bytes")?,
                _ => self.unknown(p, None),
            }
        }
        if ssl {
            self.report(
                &format!("{path}/ssl"),
                Some(&format!("port {}", s.port)),
                UnsupportedKind::NotSupported,
                "TLS listen sockets; the socket is left out (put a TLS-terminating proxy in \
                 front of Throng)",
            );
            return Ok(());
        }
        self.sockets.push(s);
        Ok(())
    }

    /// `<relay>`, as `_parse_relay`: on-demand defaults to `<relays-on-demand>` as read so far.
    fn relay(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        let mut r = RelayConfig {
            server: "127.0.0.1".into(),
            port: 0,
            on_demand: self.relays_on_demand,
            ..RelayConfig::default()
        };
        let mut bind = None;
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let p = p.as_str();
            match c.name.as_str() {
                "server" => r.server = Self::string(c).unwrap_or_default(),
                "port" => {
                    if let Some(port) = self.unsigned(p, c, "a port number")? {
                        r.port = port;
                    }
                }
                "mount" => r.mount = Self::string(c).unwrap_or_default(),
                "local-mount" => r.local_mount = Self::string(c),
                "username" => r.username = Self::string(c),
                "password" => r.password = Self::string(c),
                "relay-shoutcast-metadata" => {
                    if let Some(v) = self.flag(p, c, None)? {
                        r.relay_metadata = v;
                    }
                }
                "on-demand" => {
                    if let Some(v) = self.flag(p, c, None)? {
                        r.on_demand = v;
                    }
                }
                "bind" => bind = Some(p.to_owned()),
                _ => self.unknown(p, None),
            }
        }
        let context = format!("relay {}:{}{}", r.server, r.port, r.mount);
        if let Some(p) = bind {
            self.report(
                &p,
                Some(&context),
                UnsupportedKind::NotSupported,
                "Throng connects to relays from the default source address",
            );
        }
        if r.port == 0 {
            self.report(
                path,
                Some(&context),
                UnsupportedKind::IgnoredByIcecast,
                "a relay without <port> connects to port 0 in Icecast 2.4.4 and never runs",
            );
            return Ok(());
        }
        self.config.relay.push(r);
        Ok(())
    }

    /// `<paths>`, as `_parse_paths` (plus Icecast-KH's `x-forwarded-for` and `deny-agents`).
    fn paths(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let text = Self::string(c);
            match c.name.as_str() {
                "basedir" => self.basedir = text.map(|t| (t, p)),
                "logdir" => match text {
                    Some(t) => self.logdir = t,
                    None => self.report(&p, None, UnsupportedKind::IgnoredByIcecast, "empty"),
                },
                "webroot" => match text {
                    Some(t) => self.webroot = t,
                    None => self.report(&p, None, UnsupportedKind::IgnoredByIcecast, "empty"),
                },
                "deny-ip" => self.deny_ip = text,
                "allow-ip" => self.allow_ip = text,
                "deny-agents" => self.deny_agents = text,
                "x-forwarded-for" => match text.as_deref().and_then(forwarder_cidr) {
                    Some(cidr) => self.config.paths.x_forwarded_for.push(cidr),
                    None => self.report(
                        &p,
                        None,
                        UnsupportedKind::NotSupported,
                        format!(
                            "{:?} is neither an address nor an address with trailing `*` parts",
                            text.unwrap_or_default()
                        ),
                    ),
                },
                "adminroot" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "the admin pages are built into Throng (no XSLT files)",
                ),
                "pidfile" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "Throng writes no pid file (run it under a service manager)",
                ),
                "alias" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    format!(
                        "path alias {} -> {}",
                        c.attr("source").unwrap_or("?"),
                        c.attr("destination")
                            .or_else(|| c.attr("dest"))
                            .unwrap_or("?")
                    ),
                ),
                "ssl-certificate" | "ssl-allowed-ciphers" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "TLS (put a TLS-terminating proxy in front of Throng)",
                ),
                "mime-types" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "Throng serves no static files, so needs no MIME types file",
                ),
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<logging>`, as `_parse_logging`.
    fn logging(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            match c.name.as_str() {
                "accesslog" => match Self::string(c) {
                    Some(t) => self.accesslog = t,
                    None => self.report(&p, None, UnsupportedKind::IgnoredByIcecast, "empty"),
                },
                "errorlog" => match Self::string(c) {
                    Some(t) => self.errorlog = t,
                    None => self.report(&p, None, UnsupportedKind::IgnoredByIcecast, "empty"),
                },
                "loglevel" => {
                    if let Some(v) = self.int(&p, c, None)? {
                        self.config.logging.level = log_level(v).to_owned();
                    }
                }
                "playlistlog" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "no playlist log (titles are in the status JSON and the error log at debug level)",
                ),
                "logsize" | "logarchive" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "Throng does not rotate its logs (use logrotate with copytruncate)",
                ),
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<security>`, as `_parse_security`.
    fn security(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            match c.name.as_str() {
                "chroot" => {
                    self.chroot = self.flag(&p, c, None)? == Some(true);
                    if self.chroot {
                        self.report(
                            &p,
                            None,
                            UnsupportedKind::NotSupported,
                            "Throng does not chroot; paths are resolved inside <basedir> so the \
                             same files are used",
                        );
                    }
                }
                "changeowner" => {
                    let who: Vec<String> = c
                        .children
                        .iter()
                        .map(|u| format!("{}={}", u.name, u.text().unwrap_or_default()))
                        .collect();
                    self.report(
                        &p,
                        None,
                        UnsupportedKind::NotSupported,
                        format!(
                            "Throng does not switch user ({}); start it as that user instead",
                            who.join(", ")
                        ),
                    );
                }
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<http-headers>`, as `_parse_http_headers`: Icecast stops at the first child that is not
    /// a complete `<header name= value=>` of type `static`.
    fn http_headers(&mut self, path: &str, el: &Element, context: Option<&str>) -> Vec<HttpHeader> {
        let mut out = Vec::new();
        let mut stopped = false;
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            if stopped {
                self.report(
                    &p,
                    context,
                    UnsupportedKind::IgnoredByIcecast,
                    "after an invalid entry Icecast reads no further headers",
                );
                continue;
            }
            let (name, value) = match (c.name.as_str(), c.attr("name"), c.attr("value")) {
                ("header", Some(n), Some(v)) if c.attr("type").is_none_or(|t| t == "static") => {
                    (n, v)
                }
                _ => {
                    self.report(
                        &p,
                        context,
                        UnsupportedKind::IgnoredByIcecast,
                        "not a <header name= value=> of type static: Icecast stops reading here",
                    );
                    stopped = true;
                    continue;
                }
            };
            if let Some(status) = c.attr("status").map(str::trim) {
                if status != "200" && status != "0" {
                    self.report(
                        &format!("{p}/@status"),
                        context,
                        UnsupportedKind::NotSupported,
                        format!(
                            "header {name} only on status {status}: Throng adds configured \
                             headers to listener responses (200) only, so it is left out"
                        ),
                    );
                    continue;
                }
            }
            out.push(HttpHeader {
                name: name.to_owned(),
                value: value.to_owned(),
            });
        }
        out
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

    /// Listen addresses and the SHOUTcast source mount from the sockets read.
    fn finish_listen(&mut self) -> Result<(), IcecastXmlError> {
        let mut sockets = std::mem::take(&mut self.sockets);
        if !self.any_listen_socket {
            sockets.push(
                self.legacy_socket
                    .take()
                    .unwrap_or_else(|| legacy("icecast")),
            );
        } else {
            for p in std::mem::take(&mut self.legacy_paths) {
                self.report(
                    &p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "a top-level port or bind-address is dropped when <listen-socket>s exist",
                );
            }
        }
        let first_port = sockets
            .iter()
            .find(|s| !s.shoutcast_compat)
            .map(|s| s.port)
            .ok_or(IcecastXmlError::NoListenSocket)?;
        let mut global_mount_used = false;
        let mut first_http = true;
        self.config.listen.clear();
        for s in sockets {
            let context = format!("port {}", s.port);
            if s.shoutcast_compat {
                let mount = s.shoutcast_mount.clone().or_else(|| {
                    global_mount_used = true;
                    Some(
                        self.shoutcast_mount
                            .as_ref()
                            .map_or("/stream", |(m, _)| m.as_str())
                            .to_owned(),
                    )
                });
                if s.port == first_port.wrapping_add(1) && self.config.shoutcast_mount.is_none() {
                    self.config.shoutcast_mount = mount;
                } else {
                    self.report(
                        &format!("{}/shoutcast-compat", s.path),
                        Some(&context),
                        UnsupportedKind::NotSupported,
                        "Throng takes SHOUTcast sources only on the port after the first \
                         listen port; this socket is left out",
                    );
                }
                continue;
            }
            if let Some(m) = &s.shoutcast_mount {
                if first_http && self.config.shoutcast_mount.is_none() {
                    self.config.shoutcast_mount = Some(m.clone());
                } else {
                    self.report(
                        &format!("{}/shoutcast-mount", s.path),
                        Some(&context),
                        UnsupportedKind::NotSupported,
                        "Throng takes SHOUTcast sources only on the port after the first \
                         listen port",
                    );
                }
            }
            first_http = false;
            if let Some(b) = s.sndbuf.filter(|&b| b > 0) {
                if self.config.limits.listener_sndbuf == 0 {
                    self.config.limits.listener_sndbuf = b;
                } else if self.config.limits.listener_sndbuf != b {
                    self.report(
                        &format!("{}/so-sndbuf", s.path),
                        Some(&context),
                        UnsupportedKind::NotSupported,
                        "Throng has one send buffer size for all sockets \
                         (`limits.listener-sndbuf`, from the first socket)",
                    );
                }
            }
            let ip = s.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            self.config.listen.push(SocketAddr::new(ip, s.port));
        }
        if !global_mount_used {
            if let Some((_, p)) = self.shoutcast_mount.take() {
                self.report(
                    &p,
                    None,
                    UnsupportedKind::IgnoredByIcecast,
                    "used only by a <listen-socket> with <shoutcast-compat>1",
                );
            }
        }
        Ok(())
    }

    /// `[master]` when Icecast would poll a master: it needs the server, a port and a password
    /// (`slave.c:update_from_master`).
    fn finish_master(&mut self) {
        match (&self.master_server, &self.master_password, self.master_port) {
            (Some(server), Some(password), port) if port != 0 => {
                self.config.master = Some(MasterConfig {
                    server: server.clone(),
                    port,
                    username: self
                        .master_username
                        .clone()
                        .unwrap_or_else(|| "relay".into()),
                    password: password.clone(),
                    update_interval: self.master_interval,
                    on_demand: self.relays_on_demand,
                });
            }
            _ => {
                for p in std::mem::take(&mut self.master_paths) {
                    self.report(
                        &p,
                        None,
                        UnsupportedKind::IgnoredByIcecast,
                        "Icecast polls a master only with <master-server>, \
                         <master-server-port> and <master-password> all set",
                    );
                }
            }
        }
    }
}

/// The implicit socket of a top-level `<port>`/`<bind-address>` (Icecast's first
/// `listen_sock`, port 8000 on every address).
fn legacy(path: &str) -> Socket {
    Socket {
        path: path.to_owned(),
        port: 8000,
        bind: None,
        shoutcast_mount: None,
        shoutcast_compat: false,
        sndbuf: None,
    }
}

/// A numeric bind address (Icecast resolves it with `AI_NUMERICHOST`).
fn ip(path: &str, el: &Element) -> Result<IpAddr, IcecastXmlError> {
    let text = el.text().unwrap_or_default();
    text.trim().parse().map_err(|_| IcecastXmlError::BadValue {
        path: path.to_owned(),
        value: text.to_owned(),
        expected: "a numeric IPv4 or IPv6 address",
    })
}

/// Icecast-KH `<x-forwarded-for>`: an address, or an IPv4 address with trailing `*` parts
/// (`10.0.*.*`), as a CIDR range.
fn forwarder_cidr(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if parse_cidr(raw).is_some() {
        return Some(raw.to_owned());
    }
    let parts: Vec<&str> = raw.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let fixed = parts.iter().take_while(|p| **p != "*").count();
    if parts[fixed..].iter().any(|p| *p != "*") {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(&parts[..fixed]) {
        *o = p.parse().ok()?;
    }
    Some(format!("{}/{}", Ipv4Addr::from(octets), fixed * 8))
}

/// Icecast `loglevel` (4 debug, 3 info, 2 warn, 1 error) as a tracing level.
fn log_level(level: i64) -> &'static str {
    match level {
        i64::MIN..=1 => "error",
        2 => "warn",
        3 => "info",
        _ => "debug",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AuthConfig, LagPolicy};
    use UnsupportedKind::{IgnoredByIcecast, NotSupported, Unknown};

    fn data(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn import(xml: &str) -> Import {
        parse(xml, Path::new("/etc/icecast")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn reported(imp: &Import) -> Vec<(&str, UnsupportedKind)> {
        imp.unsupported
            .iter()
            .map(|u| (u.path.as_str(), u.kind))
            .collect()
    }

    fn roundtrip(c: &Config) {
        let text = c.to_toml().unwrap();
        let back = Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(&back, c, "TOML:\n{text}");
    }

    #[test]
    fn debian_sample_imports_with_its_values() {
        let imp = parse(&data("debian-icecast.xml"), Path::new("/etc/icecast2")).unwrap();
        let c = &imp.config;
        assert_eq!(c.listen, vec!["0.0.0.0:8000".parse().unwrap()]);
        assert_eq!(
            (c.location.as_str(), c.admin_email.as_str()),
            ("Earth", "icemaster@localhost")
        );
        assert_eq!(c.hostname, "localhost");
        assert_eq!(c.limits.clients, 100);
        assert_eq!(c.limits.sources, 2);
        assert_eq!(c.limits.queue_size, 524_288);
        assert_eq!(c.limits.burst_size, 65_535);
        assert_eq!((c.limits.header_timeout, c.limits.source_timeout), (15, 10));
        let a = &c.authentication;
        assert_eq!(a.source_password.as_deref(), Some("hackme"));
        assert_eq!(a.relay_password.as_deref(), Some("hackme"));
        assert_eq!(a.admin_user.as_deref(), Some("admin"));
        assert_eq!(a.admin_password.as_deref(), Some("hackme"));
        assert_eq!(c.http_headers.len(), 1);
        assert_eq!(c.http_headers[0].name, "Access-Control-Allow-Origin");
        assert_eq!(c.http_headers[0].value, "*");
        assert_eq!(
            c.paths.webroot.as_deref(),
            Some(Path::new("/usr/share/icecast2/web"))
        );
        assert_eq!(c.logging.access_log, "/var/log/icecast2/access.log");
        assert_eq!(c.logging.error_log, "/var/log/icecast2/error.log");
        assert_eq!(c.logging.level, "info");
        assert!(c.mount.is_empty() && c.relay.is_empty() && c.master.is_none());
        assert_eq!(c.shoutcast_mount, None);
        assert_eq!(
            reported(&imp),
            vec![
                ("icecast/limits/client-timeout", IgnoredByIcecast),
                ("icecast/fileserve", NotSupported),
                ("icecast/paths/adminroot", NotSupported),
                ("icecast/paths/alias", NotSupported),
                ("icecast/logging/logsize", NotSupported),
                ("icecast/paths/basedir", IgnoredByIcecast),
            ]
        );
        roundtrip(c);
    }

    #[test]
    fn every_supported_element_is_carried_over() {
        let imp = import(&data("icecast-full.xml"));
        let c = &imp.config;
        assert_eq!(c.location, "Studio & Tower");
        assert_eq!(c.admin_email, "ops@example.org");
        assert_eq!(c.hostname, "radio.example.org");
        assert_eq!(c.server_id, "Icecast 2.4.4");
        let l = &c.limits;
        assert_eq!((l.clients, l.sources, l.queue_size), (5000, 4, 1_048_576));
        assert_eq!((l.header_timeout, l.source_timeout), (7, 12));
        assert_eq!(
            l.burst_size, 32_768,
            "burst-size after burst-on-connect=0 wins"
        );
        assert_eq!(l.listener_sndbuf, 65_536);
        assert_eq!(l.lag_policy, LagPolicy::Drop);
        assert_eq!(c.workers, 3);
        let a = &c.authentication;
        assert_eq!(a.source_password.as_deref(), Some("src-pw"));
        assert_eq!(a.relay_user.as_deref(), Some("slave"));
        assert_eq!(a.relay_password.as_deref(), Some("relay-pw"));
        assert_eq!(a.admin_user.as_deref(), Some("boss"));
        assert_eq!(a.admin_password.as_deref(), Some("admin-pw"));
        assert_eq!(
            c.listen,
            vec![
                "127.0.0.1:8100".parse().unwrap(),
                "[::1]:8200".parse().unwrap()
            ],
            "the TLS socket is left out"
        );
        assert_eq!(c.shoutcast_mount.as_deref(), Some("/sc.mp3"));
        assert_eq!(
            c.http_headers,
            vec![header("Access-Control-Allow-Origin", "*")]
        );

        let m = c.master.as_ref().unwrap();
        assert_eq!((m.server.as_str(), m.port), ("master.example.org", 8001));
        assert_eq!(
            (m.username.as_str(), m.password.as_str()),
            ("relayer", "master-pw")
        );
        assert_eq!((m.update_interval, m.on_demand), (60, true));

        assert_eq!(c.relay.len(), 2);
        let r = &c.relay[0];
        assert_eq!((r.server.as_str(), r.port), ("origin.example.org", 8080));
        assert_eq!(
            (r.mount.as_str(), r.local()),
            ("/upstream.ogg", "/relayed.ogg")
        );
        assert_eq!(
            (r.username.as_deref(), r.password.as_deref()),
            (Some("ru"), Some("rp"))
        );
        assert!(!r.relay_metadata);
        assert!(r.on_demand, "relays-on-demand read before the relay");
        let r = &c.relay[1];
        assert_eq!(
            (r.local(), r.relay_metadata, r.on_demand),
            ("/always.mp3", true, false)
        );

        let names: Vec<&str> = c.mount.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["/live.mp3", "/backup.mp3", "/*"]);
        let live = &c.mount[0];
        assert_eq!(
            (live.username.as_deref(), live.password.as_deref()),
            (Some("dj"), Some("live-pw"))
        );
        assert_eq!(
            live.max_listeners,
            Some(100),
            "-1 is 'unset' for merge_mounts"
        );
        assert_eq!(live.fallback_mount.as_deref(), Some("/backup.mp3"));
        assert!(live.fallback_override && live.fallback_when_full && live.hidden);
        assert_eq!(live.public, Some(true));
        assert_eq!(live.stream_name.as_deref(), Some("Live Show"));
        assert_eq!(
            live.stream_description.as_deref(),
            Some("Live from the studio")
        );
        assert_eq!(
            live.stream_url.as_deref(),
            Some("http://radio.example.org/")
        );
        assert_eq!(live.genre.as_deref(), Some("Jazz"));
        assert_eq!(live.bitrate.as_deref(), Some("128"));
        assert_eq!(
            (live.queue_size, live.burst_size),
            (Some(262_144), Some(16_384))
        );
        assert_eq!(
            live.intro.as_deref(),
            Some(Path::new("/etc/icecast/web/intro.mp3"))
        );
        assert_eq!(live.max_listener_duration, Some(3600));
        assert_eq!(
            live.authentication,
            Some(AuthConfig::Htpasswd {
                filename: "/etc/icecast/users.htpasswd".into()
            })
        );
        assert_eq!(
            live.http_headers,
            vec![header("X-Live", "yes"), header("X-Default", "d")]
        );

        let backup = &c.mount[1];
        assert_eq!(backup.max_listeners, Some(50));
        assert_eq!(backup.public, Some(false), "no-yp");
        assert_eq!(
            backup.authentication, None,
            "2.4.4 does not merge the authenticator"
        );
        assert_eq!(backup.max_listener_duration, Some(3600));

        let all = &c.mount[2];
        assert_eq!(all.max_listeners, Some(100));
        assert_eq!(all.public, Some(false));
        assert_eq!(all.http_headers, vec![header("X-Default", "d")]);
        let Some(AuthConfig::Url(u)) = &all.authentication else {
            panic!("{:?}", all.authentication)
        };
        assert_eq!(
            u.listener_add.as_deref(),
            Some("http://auth.example.org/add")
        );
        assert_eq!(
            u.listener_remove.as_deref(),
            Some("http://auth.example.org/remove")
        );
        assert_eq!(
            u.mount_add.as_deref(),
            Some("http://auth.example.org/start")
        );
        assert_eq!(
            u.mount_remove.as_deref(),
            Some("http://auth.example.org/stop")
        );
        assert_eq!(
            u.stream_auth.as_deref(),
            Some("http://auth.example.org/source")
        );
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("au"), Some("ap"))
        );
        assert_eq!(u.headers.as_deref(), Some("x-token,x-pragma"));
        assert_eq!(u.header_prefix.as_deref(), Some("ClientHeader."));
        assert_eq!(u.auth_header.as_deref(), Some("icecast-auth-user: yes"));
        assert_eq!(
            u.timelimit_header.as_deref(),
            Some("icecast-auth-timelimit:")
        );
        assert_eq!(u.timeout, Some(15));
        assert_eq!(c.mount_for("/other.ogg").unwrap().name, "/*");

        let p = &c.paths;
        assert_eq!(p.webroot.as_deref(), Some(Path::new("/etc/icecast/web")));
        assert_eq!(
            p.deny_ip.as_deref(),
            Some(Path::new("/etc/icecast/deny.txt"))
        );
        assert_eq!(
            p.allow_ip.as_deref(),
            Some(Path::new("/etc/icecast/allow.txt"))
        );
        assert_eq!(
            p.deny_agents.as_deref(),
            Some(Path::new("/etc/icecast/agents.txt"))
        );
        assert_eq!(p.x_forwarded_for, ["10.1.2.3", "192.168.0.0/16"]);
        assert_eq!(c.logging.access_log, "/etc/icecast/logs/access.log");
        assert_eq!(c.logging.error_log, "-");
        assert_eq!(c.logging.level, "debug");

        assert_eq!(
            reported(&imp),
            vec![
                ("icecast/limits/client-timeout", IgnoredByIcecast),
                ("icecast/limits/threadpool", IgnoredByIcecast),
                ("icecast/listen-socket/ssl", NotSupported),
                ("icecast/http-headers/header/@status", NotSupported),
                ("icecast/mount/dump-file", NotSupported),
                (
                    "icecast/mount/authentication/option[@name=allow_duplicate_users]",
                    NotSupported
                ),
                ("icecast/directory/yp-url-timeout", NotSupported),
                ("icecast/directory/yp-url", NotSupported),
                ("icecast/paths/adminroot", NotSupported),
                ("icecast/paths/pidfile", NotSupported),
                ("icecast/paths/alias", NotSupported),
                ("icecast/logging/logsize", NotSupported),
                ("icecast/security/changeowner", NotSupported),
                ("icecast/bogus-element", Unknown),
                ("icecast/paths/basedir", IgnoredByIcecast),
            ]
        );
        let dump = &imp.unsupported[4];
        assert_eq!(dump.name, "dump-file");
        assert_eq!(dump.context.as_deref(), Some("mount /live.mp3"));
        assert_eq!(
            dump.to_string(),
            "icecast/mount/dump-file (mount /live.mp3): not supported: Throng does not dump streams to files"
        );
        assert_eq!(imp.unsupported[5].name, "option");
        roundtrip(c);
    }

    fn header(name: &str, value: &str) -> HttpHeader {
        HttpHeader {
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn an_empty_file_yields_icecast_defaults() {
        let imp = import("<icecast/>");
        let c = &imp.config;
        assert_eq!(c.listen, vec!["0.0.0.0:8000".parse().unwrap()]);
        let l = &c.limits;
        assert_eq!(
            (l.clients, l.sources, l.queue_size, l.burst_size),
            (256, 16, 512_000, 65_536)
        );
        assert_eq!((l.header_timeout, l.source_timeout), (15, 10));
        assert_eq!(c.logging.access_log, "/usr/local/icecast/logs/access.log");
        assert_eq!(c.logging.error_log, "/usr/local/icecast/logs/error.log");
        assert_eq!(c.logging.level, "info");
        assert_eq!(
            c.paths.webroot.as_deref(),
            Some(Path::new("/usr/local/icecast/webroot"))
        );
        assert_eq!(c.authentication.source_password, None);
        assert!(!c.demo);
        assert!(imp.unsupported.is_empty());
        roundtrip(c);
    }

    #[test]
    fn burst_on_connect_zero_disables_the_burst() {
        let c =
            import("<icecast><limits><burst-on-connect>0</burst-on-connect></limits></icecast>")
                .config;
        assert_eq!(c.limits.burst_size, 0);
        let c =
            import("<icecast><limits><burst-on-connect>1</burst-on-connect></limits></icecast>")
                .config;
        assert_eq!(c.limits.burst_size, 65_536);
    }

    #[test]
    fn top_level_port_is_dropped_when_listen_sockets_exist() {
        let c =
            import("<icecast><port>9000</port><bind-address>127.0.0.2</bind-address></icecast>")
                .config;
        assert_eq!(c.listen, vec!["127.0.0.2:9000".parse().unwrap()]);
        let imp = import(
            "<icecast><port>9000</port><listen-socket><port>9100</port></listen-socket></icecast>",
        );
        assert_eq!(imp.config.listen, vec!["0.0.0.0:9100".parse().unwrap()]);
        assert_eq!(reported(&imp), vec![("icecast/port", IgnoredByIcecast)]);
    }

    #[test]
    fn shoutcast_compat_socket_after_the_first_port_takes_the_global_mount() {
        let imp = import(
            "<icecast><shoutcast-mount>/sc</shoutcast-mount>\
             <listen-socket><port>9000</port></listen-socket>\
             <listen-socket><port>9001</port><shoutcast-compat>1</shoutcast-compat></listen-socket>\
             </icecast>",
        );
        assert_eq!(imp.config.listen, vec!["0.0.0.0:9000".parse().unwrap()]);
        assert_eq!(imp.config.shoutcast_mount.as_deref(), Some("/sc"));
        assert!(imp.unsupported.is_empty(), "{:?}", imp.unsupported);
        let imp = import("<icecast><shoutcast-mount>/sc</shoutcast-mount></icecast>");
        assert_eq!(imp.config.shoutcast_mount, None);
        assert_eq!(
            reported(&imp),
            vec![("icecast/shoutcast-mount", IgnoredByIcecast)]
        );
    }

    #[test]
    fn default_mounts_merge_only_where_their_pattern_matches() {
        let c = import(
            "<icecast>\
             <mount type=\"normal\"><mount-name>/show-1</mount-name><hidden>0</hidden></mount>\
             <mount type=\"normal\"><mount-name>/news</mount-name></mount>\
             <mount type=\"default\"><mount-name>/show-*</mount-name><hidden>1</hidden>\
               <burst-size>0</burst-size></mount>\
             </icecast>",
        )
        .config;
        let names: Vec<&str> = c.mount.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["/show-1", "/news", "/show-*"]);
        assert!(c.mount[0].hidden, "flags are OR-ed, as merge_mounts");
        assert_eq!(c.mount[0].burst_size, Some(0));
        assert!(!c.mount[1].hidden);
        assert_eq!(c.mount[1].burst_size, None);
        assert_eq!(c.mount_for("/show-2").unwrap().name, "/show-*");
    }

    #[test]
    fn relays_on_demand_applies_to_later_relays_only() {
        let c = import(
            "<icecast><relay><port>1</port><mount>/a</mount></relay>\
             <relays-on-demand>1</relays-on-demand>\
             <relay><port>1</port><mount>/b</mount></relay></icecast>",
        )
        .config;
        assert_eq!(
            c.relay[0].server, "127.0.0.1",
            "Icecast's default relay server"
        );
        assert!(!c.relay[0].on_demand);
        assert!(c.relay[1].on_demand);
        assert!(c.master.is_none());
        let imp = import("<icecast><relay><mount>/a</mount></relay></icecast>");
        assert!(imp.config.relay.is_empty(), "port 0 never connects");
        assert_eq!(reported(&imp), vec![("icecast/relay", IgnoredByIcecast)]);
        let imp = import("<icecast><master-server>m</master-server></icecast>");
        assert!(imp.config.master.is_none());
        assert_eq!(
            reported(&imp),
            vec![("icecast/master-server", IgnoredByIcecast)]
        );
    }

    #[test]
    fn chroot_resolves_every_path_inside_basedir() {
        let imp = import(
            "<icecast><security><chroot>1</chroot></security>\
             <paths><basedir>/srv/ice</basedir><logdir>/logs</logdir><webroot>/web</webroot>\
             <deny-ip>/deny</deny-ip></paths></icecast>",
        );
        let c = &imp.config;
        assert_eq!(c.logging.access_log, "/srv/ice/logs/access.log");
        assert_eq!(c.paths.webroot.as_deref(), Some(Path::new("/srv/ice/web")));
        assert_eq!(c.paths.deny_ip.as_deref(), Some(Path::new("/srv/ice/deny")));
        assert_eq!(
            reported(&imp),
            vec![("icecast/security/chroot", NotSupported)]
        );
    }

    #[test]
    fn http_headers_stop_at_the_first_invalid_entry() {
        let imp = import(
            "<icecast><http-headers><header name=\"A\" value=\"1\"/><header name=\"B\"/>\
             <header name=\"C\" value=\"3\"/></http-headers></icecast>",
        );
        assert_eq!(imp.config.http_headers, vec![header("A", "1")]);
        assert_eq!(
            reported(&imp),
            vec![
                ("icecast/http-headers/header", IgnoredByIcecast),
                ("icecast/http-headers/header", IgnoredByIcecast),
            ]
        );
    }

    #[test]
    fn mounts_icecast_would_drop_are_reported() {
        let imp = import(
            "<icecast><mount><username>x</username></mount>\
             <mount type=\"weird\"><mount-name>/w</mount-name></mount>\
             <mount><mount-name>nolead</mount-name></mount>\
             <mount><mount-name>/open</mount-name><authentication type=\"command\"/></mount>\
             </icecast>",
        );
        assert_eq!(imp.config.mount.len(), 1);
        assert_eq!(imp.config.mount[0].authentication, None);
        assert_eq!(
            reported(&imp),
            vec![
                ("icecast/mount", IgnoredByIcecast),
                ("icecast/mount/@type", IgnoredByIcecast),
                ("icecast/mount/mount-name", IgnoredByIcecast),
                ("icecast/mount/authentication/@type", NotSupported),
            ]
        );
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let err = |xml: &str| parse(xml, Path::new("/")).unwrap_err().to_string();
        assert!(err("<icecast><limits>").contains("malformed XML"));
        assert!(err("<shoutcast/>").contains("not <icecast>"));
        let e = err("<icecast><limits><clients>lots</clients></limits></icecast>");
        assert!(
            e.contains("icecast/limits/clients") && e.contains("lots"),
            "{e}"
        );
        let e = err("<icecast><listen-socket><bind-address>example.org</bind-address></listen-socket></icecast>");
        assert!(e.contains("numeric"), "{e}");
        let e = err("<icecast><listen-socket><port>70000</port></listen-socket></icecast>");
        assert!(e.contains("port"), "{e}");
        let e = err("<icecast><limits><queue-size>100</queue-size></limits></icecast>");
        assert!(e.contains("queue-size"), "{e}");
        let e = err("<icecast><listen-socket><ssl>1</ssl></listen-socket></icecast>");
        assert!(e.contains("listen-socket"), "{e}");
        let e = err("<icecast><mount><mount-name>/a</mount-name><authentication type=\"htpasswd\"/></mount></icecast>");
        assert!(e.contains("filename"), "{e}");
    }

    #[test]
    fn forwarder_wildcards_become_cidr_ranges() {
        assert_eq!(forwarder_cidr("10.0.*.*").as_deref(), Some("10.0.0.0/16"));
        assert_eq!(forwarder_cidr("*.*.*.*").as_deref(), Some("0.0.0.0/0"));
        assert_eq!(forwarder_cidr("::1").as_deref(), Some("::1"));
        assert_eq!(forwarder_cidr("10.*.0.1"), None);
        assert_eq!(forwarder_cidr("proxy.example.org"), None);
    }
}
