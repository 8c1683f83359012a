//! The state of an `icecast.xml` import, [`Importer`]: the configuration being built, the
//! values that can only be resolved once the whole file is read, the report of what is left
//! out, and the helpers every section reader uses (reporting, and Icecast's reading of
//! integers, flags and strings). The readers of the sections extend it with `impl Importer`
//! blocks in their own files (`document.rs`, `listen.rs`, `mounts.rs`, `relays.rs`,
//! `sections.rs`); this file imports none of them, only the leaf files of the types it holds.

use std::path::Path;

use super::error::IcecastXmlError;
use super::raw_mount::RawMount;
use super::report::{Unsupported, UnsupportedKind};
use super::socket::Socket;
use super::tree::Element;
use crate::config::Config;

/// What `<mime-types>` (top level or in `<paths>`) gets in the report.
pub(super) const MIME_TYPES_NOTE: &str =
    "webroot files (fileserve) get their content type from Throng's built-in table, by extension";

/// Import state: the configuration being built, values that can only be resolved once the
/// whole file is read, and the report.
pub(super) struct Importer<'a> {
    /// The XML file's directory, which relative paths resolve against.
    pub base: &'a Path,
    /// The configuration being built, Icecast's defaults where they differ from Throng's.
    pub config: Config,
    /// What the configuration leaves out, in the order found.
    pub report: Vec<Unsupported>,
    /// The implicit socket of a top-level `<port>`/`<bind-address>`, if either was read.
    pub legacy_socket: Option<Socket>,
    /// Paths of the top-level `<port>`/`<bind-address>` read, for the report.
    pub legacy_paths: Vec<String>,
    /// Whether any `<listen-socket>` was read (TLS ones included, though left out).
    pub any_listen_socket: bool,
    /// The `<listen-socket>`s kept (TLS ones left out), in document order.
    pub sockets: Vec<Socket>,
    /// The top-level `<shoutcast-mount>` and its path.
    pub shoutcast_mount: Option<(String, String)>,
    /// `<relays-on-demand>` as read so far (the default of later `<relay>`s and the master).
    pub relays_on_demand: bool,
    /// `<master-server>`.
    pub master_server: Option<String>,
    /// `<master-server-port>`, `0` when unset.
    pub master_port: u16,
    /// `<master-username>`.
    pub master_username: Option<String>,
    /// `<master-password>`.
    pub master_password: Option<String>,
    /// `<master-update-interval>` in seconds (Icecast's default 120).
    pub master_interval: u64,
    /// Paths of the master settings read, for the report when no master is polled.
    pub master_paths: Vec<String>,
    /// `<security><chroot>`: paths resolve inside `basedir`.
    pub chroot: bool,
    /// `<paths><basedir>` as written, and its path.
    pub basedir: Option<(String, String)>,
    /// `<paths><logdir>` as written.
    pub logdir: String,
    /// `<paths><webroot>` as written.
    pub webroot: String,
    /// `<paths><deny-ip>` as written.
    pub deny_ip: Option<String>,
    /// `<paths><allow-ip>` as written.
    pub allow_ip: Option<String>,
    /// `<paths><deny-agents>` as written.
    pub deny_agents: Option<String>,
    /// `<paths><pidfile>` as written.
    pub pidfile: Option<String>,
    /// `<paths><ssl-certificate>` as written.
    pub ssl_certificate: Option<String>,
    /// `<paths><ssl-private-key>` as written (the certificate file when absent).
    pub ssl_private_key: Option<String>,
    /// `<logging><accesslog>`: a name inside `logdir`, or `-`.
    pub accesslog: String,
    /// `<logging><errorlog>`: a name inside `logdir`, or `-`.
    pub errorlog: String,
    /// `<logging><playlistlog>`: a name inside `logdir` (`[ledger] playlistlog`), if any.
    pub playlistlog: Option<String>,
    /// The `<mount>`s kept, normal and default, in document order.
    pub mounts: Vec<RawMount>,
}

impl<'a> Importer<'a> {
    /// An importer for a file in directory `base`, with Icecast 2.4.4's defaults.
    pub(super) fn new(base: &'a Path) -> Importer<'a> {
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
            pidfile: None,
            ssl_certificate: None,
            ssl_private_key: None,
            accesslog: "access.log".into(),
            errorlog: "error.log".into(),
            playlistlog: None,
            mounts: Vec::new(),
        }
    }

    /// Adds an entry to the report.
    pub(super) fn report(
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

    /// Reports an element Icecast 2.4.4 does not know at this place.
    pub(super) fn unknown(&mut self, path: &str, context: Option<&str>) {
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
    pub(super) fn int(
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
    pub(super) fn unsigned<T: TryFrom<i64>>(
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
    pub(super) fn flag(
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
    pub(super) fn string(el: &Element) -> Option<String> {
        el.text().map(str::to_owned)
    }
}
