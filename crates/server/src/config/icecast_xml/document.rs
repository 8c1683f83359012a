//! The whole `<icecast>` document: its direct children, dispatched as Icecast 2.4.4
//! `cfgfile.c:_parse_root` does (simple settings read here, sections handed to the readers of
//! `sections.rs`, `listen.rs`, `relays.rs` and `mounts.rs`), and the finishing pass over what
//! can only be resolved once the whole file is read: listen sockets, the master, paths
//! (`<basedir>` under `<chroot>`, logs in `<logdir>`, the webroot), the merge of
//! `type="default"` mounts into every normal mount, and the validation of the result. This file
//! extends the [`Importer`].

use super::error::IcecastXmlError;
use super::importer::{Importer, MIME_TYPES_NOTE};
use super::raw_mount::{MountType, RawMount};
use super::report::{Import, UnsupportedKind};
use super::resolver::Resolver;
use super::socket::{ip, legacy};
use super::tree::Element;
use crate::config::tls::CertificateFiles;
use crate::config::MountConfig;

impl Importer<'_> {
    /// `<icecast>`'s children, as `_parse_root`.
    pub(super) fn root(&mut self, root: &Element) -> Result<(), IcecastXmlError> {
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
                "tls-context" => self.tls_context(p, el)?,
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
                "event-bindings" => {
                    let mut h = self.event_bindings(p, el, None);
                    self.config.hook.append(&mut h);
                }
                "paths" => self.paths(p, el)?,
                "logging" => self.logging(p, el)?,
                "security" => self.security(p, el)?,
                "directory" => self.directory(p, el)?,
                "fileserve" => {
                    if let Some(v) = self.flag(p, el, None)? {
                        self.config.paths.fileserve = v;
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
                "mime-types" => {
                    self.report(p, None, UnsupportedKind::NotSupported, MIME_TYPES_NOTE)
                }
                _ => self.unknown(p, None),
            }
        }
        Ok(())
    }

    /// Resolves everything that depends on the whole file and validates the result.
    pub(super) fn finish(mut self) -> Result<Import, IcecastXmlError> {
        // Paths as written, as Icecast opens them.
        if let Some(cert) = &self.ssl_certificate {
            let key = self.ssl_private_key.as_ref().unwrap_or(cert);
            self.config.tls.certificate = vec![CertificateFiles {
                cert: cert.into(),
                key: key.into(),
            }];
        }
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
                // AzuraCast and Debian write it with <chroot>0</chroot>: no warning.
                self.report(
                    &p,
                    None,
                    UnsupportedKind::Accepted,
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
        // An absolute name is used as it is (Icecast-KH; AzuraCast writes `/dev/stderr`, which
        // is standard error, `-`).
        let in_logdir = |name: &str| match name {
            "-" | "/dev/stderr" => "-".to_owned(),
            n if n.starts_with('/') => n.to_owned(),
            n => logdir.join(n).display().to_string(),
        };
        self.config.logging.access_log = in_logdir(&self.accesslog);
        self.config.logging.error_log = in_logdir(&self.errorlog);
        // Icecast 2.4.4 opens `<logdir>/<playlistlog>` (no `-` for standard error); an
        // absolute name is used as it is, as for the other logs.
        self.config.ledger.playlistlog = self.playlistlog.as_deref().map(|n| logdir.join(n));
        let webroot = resolver.path(self.webroot.trim_end_matches('/'));
        let paths = &mut self.config.paths;
        paths.pidfile = self.pidfile.as_deref().map(|p| resolver.path(p));
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
