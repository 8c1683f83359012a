//! The server-wide sections of an `icecast.xml`, as Icecast 2.4.4 `cfgfile.c` reads them:
//! `<authentication>` (`_parse_authentication`), `<limits>` (`_parse_limits`, plus Icecast-KH's
//! `workers`), `<paths>` (`_parse_paths`, plus Icecast-KH's `x-forwarded-for` and
//! `deny-agents`), `<logging>` (`_parse_logging`), `<security>` (`_parse_security`) and
//! `<http-headers>` (`_parse_http_headers`, global or per mount).

use std::net::Ipv4Addr;

use super::error::IcecastXmlError;
use super::importer::{Importer, MIME_TYPES_NOTE};
use super::report::UnsupportedKind;
use super::tree::Element;
use crate::config::directory::DirectoryConfig;
use crate::config::tls::CertificateFiles;
use crate::config::{parse_cidr, Alias, HttpHeader};

impl Importer<'_> {
    /// `<authentication>`, as `_parse_authentication`.
    pub(super) fn authentication(
        &mut self,
        path: &str,
        el: &Element,
    ) -> Result<(), IcecastXmlError> {
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
    pub(super) fn limits(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
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
                // Written by AzuraCast and Debian's stock file; no warning for a value that does
                // nothing in Icecast either.
                "client-timeout" | "threadpool" => self.report(
                    p,
                    None,
                    UnsupportedKind::Accepted,
                    "parsed but never used by Icecast 2.4.4",
                ),
                _ => self.unknown(p, None),
            }
        }
        Ok(())
    }

    /// Icecast 2.5's `<tls-context>`: `<tls-certificate>` (the chain) and `<tls-key>` (its key;
    /// the certificate file when absent, as 2.4's one-file `<ssl-certificate>`).
    pub(super) fn tls_context(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        let (mut cert, mut key) = (None, None);
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            match c.name.as_str() {
                "tls-certificate" => cert = Self::string(c),
                "tls-key" => key = Self::string(c),
                "tls-allowed-ciphers" => self.report(
                    &p,
                    None,
                    UnsupportedKind::NotSupported,
                    "cipher lists (rustls offers only its safe default suites)",
                ),
                _ => self.unknown(&p, None),
            }
        }
        if let Some(cert) = cert {
            self.config.tls.certificate = vec![CertificateFiles {
                key: key.unwrap_or_else(|| cert.clone()).into(),
                cert: cert.into(),
            }];
        }
        Ok(())
    }

    /// `<paths>`, as `_parse_paths` (plus Icecast-KH's `x-forwarded-for` and `deny-agents`).
    pub(super) fn paths(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
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
                    UnsupportedKind::Accepted,
                    "the admin pages are built into Throng (no XSLT files to find)",
                ),
                "pidfile" => self.pidfile = text,
                // Icecast 2.4.4 reads `destination`, Icecast-KH (and AzuraCast) `dest`; an alias
                // bound to a port or address (`port=`, `bind-address=`) applies on every socket.
                "alias" => match (
                    c.attr("source"),
                    c.attr("destination").or_else(|| c.attr("dest")),
                ) {
                    (Some(source), Some(destination)) => self.config.paths.alias.push(Alias {
                        source: source.to_owned(),
                        destination: destination.to_owned(),
                    }),
                    _ => self.report(
                        &p,
                        None,
                        UnsupportedKind::IgnoredByIcecast,
                        "an <alias> needs source= and destination= (or dest=)",
                    ),
                },
                // One PEM file holding the certificate chain and its key (Icecast 2.4), or the
                // chain with its key in `<ssl-private-key>` (Icecast-KH, AzuraCast).
                "ssl-certificate" => self.ssl_certificate = text,
                "ssl-private-key" => self.ssl_private_key = text,
                "ssl-allowed-ciphers" => self.report(
                    &p,
                    None,
                    UnsupportedKind::Accepted,
                    "cipher lists: rustls offers only strong suites (TLS 1.2 ECDHE with AEAD, \
                     TLS 1.3), a subset of any list meant to exclude weak ones",
                ),
                "mime-types" => {
                    self.report(&p, None, UnsupportedKind::NotSupported, MIME_TYPES_NOTE)
                }
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<logging>`, as `_parse_logging`.
    pub(super) fn logging(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
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
                "playlistlog" => match Self::string(c) {
                    Some(t) => self.playlistlog = Some(t),
                    None => self.report(&p, None, UnsupportedKind::IgnoredByIcecast, "empty"),
                },
                "logsize" => {
                    if let Some(kb) = self.unsigned::<u64>(&p, c, "a size in KiB")? {
                        self.config.logging.logsize = Some(kb);
                    }
                }
                "logarchive" => {
                    if let Some(v) = self.flag(&p, c, None)? {
                        self.config.logging.logarchive = v;
                    }
                }
                _ => self.unknown(&p, None),
            }
        }
        Ok(())
    }

    /// `<directory>`, as `_parse_directory`: one YP directory (`yp-url`, `yp-url-timeout`,
    /// `touch-interval`); a directory without `yp-url` is reported and left out.
    pub(super) fn directory(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
        let mut d = DirectoryConfig::default();
        let mut url = None;
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let p = p.as_str();
            match c.name.as_str() {
                "yp-url" => url = Self::string(c),
                "yp-url-timeout" => {
                    if let Some(v) = self.unsigned(p, c, "a number of seconds")? {
                        d.yp_url_timeout = v;
                    }
                }
                "touch-interval" => {
                    if let Some(v) = self.unsigned(p, c, "a number of seconds")? {
                        d.touch_interval = v;
                    }
                }
                _ => self.unknown(p, None),
            }
        }
        match url {
            Some(u) => {
                d.yp_url = u;
                match d.check(path) {
                    Ok(()) => self.config.directory.push(d),
                    Err(e) => self.report(path, None, UnsupportedKind::NotSupported, e),
                }
            }
            None => self.report(path, None, UnsupportedKind::IgnoredByIcecast, "no <yp-url>"),
        }
        Ok(())
    }

    /// `<security>`, as `_parse_security`.
    pub(super) fn security(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
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
    pub(super) fn http_headers(
        &mut self,
        path: &str,
        el: &Element,
        context: Option<&str>,
    ) -> Vec<HttpHeader> {
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
}

/// Icecast-KH `<x-forwarded-for>`: an address, or an IPv4 address with trailing `*` parts
/// (`10.0.*.*`), as a CIDR range.
pub(super) fn forwarder_cidr(raw: &str) -> Option<String> {
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
pub(super) fn log_level(level: i64) -> &'static str {
    match level {
        i64::MIN..=1 => "error",
        2 => "warn",
        3 => "info",
        _ => "debug",
    }
}
