//! `<listen-socket>`s of an `icecast.xml` (`cfgfile.c:_parse_listen_socket`) and the legacy
//! top-level `<port>`/`<bind-address>`, turned into Throng's `listen` addresses, SHOUTcast
//! source mount and listener send-buffer size. Icecast binds every address when
//! `bind-address` is absent; the import writes `0.0.0.0`. The socket itself (`Socket`) is in
//! `socket.rs`; this file extends the [`Importer`] with the methods that read and finish them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::error::IcecastXmlError;
use super::importer::Importer;
use super::report::UnsupportedKind;
use super::socket::{ip, legacy, tls_mode, SocketTls};
use super::tree::Element;

impl Importer<'_> {
    /// `<listen-socket>`, as `_parse_listen_socket`.
    pub(super) fn listen_socket(
        &mut self,
        path: &str,
        el: &Element,
    ) -> Result<(), IcecastXmlError> {
        let mut s = legacy(path);
        self.any_listen_socket = true;
        if let Some(word) = el.attr("tls") {
            self.socket_tls(&mut s, &format!("{path}/@tls"), word);
        }
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
                "ssl" => {
                    if self.flag(p, c, None)? == Some(true) {
                        s.tls = SocketTls::On;
                        s.tls_path = Some(p.to_owned());
                    }
                }
                "tls" => {
                    let word = c.text().unwrap_or_default().to_owned();
                    self.socket_tls(&mut s, p, &word);
                }
                "so-sndbuf" => s.sndbuf = self.unsigned(p, c, "a size in bytes")?,
                _ => self.unknown(p, None),
            }
        }
        self.sockets.push(s);
        Ok(())
    }

    /// Icecast 2.5's `tls` mode of socket `s`, from element or attribute `path`.
    fn socket_tls(&mut self, s: &mut super::socket::Socket, path: &str, word: &str) {
        match tls_mode(word) {
            Some(SocketTls::Off) => {}
            Some(mode) => {
                s.tls = mode;
                s.tls_path = Some(path.to_owned());
            }
            None => self.report(
                path,
                Some(&format!("port {}", s.port)),
                UnsupportedKind::NotSupported,
                format!("TLS mode {word:?} (Throng has auto, rfc2818 and disabled); plain HTTP"),
            ),
        }
    }

    /// Listen addresses and the SHOUTcast source mount from the sockets read.
    pub(super) fn finish_listen(&mut self) -> Result<(), IcecastXmlError> {
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
            .find(|s| !s.shoutcast_compat && s.tls == SocketTls::Off)
            .map(|s| s.port)
            .ok_or(IcecastXmlError::NoListenSocket)?;
        let mut global_mount_used = false;
        let mut first_http = true;
        self.config.listen.clear();
        for s in sockets {
            let context = format!("port {}", s.port);
            if s.tls != SocketTls::Off {
                let ip = s.bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                if self.config.tls.certificate.is_empty() {
                    self.report(
                        s.tls_path.as_deref().unwrap_or(&s.path),
                        Some(&context),
                        UnsupportedKind::NotSupported,
                        "a TLS socket without <ssl-certificate> or <tls-context>: left out",
                    );
                } else if s.tls == SocketTls::Auto {
                    self.config.tls.auto.push(SocketAddr::new(ip, s.port));
                } else {
                    self.config.tls.listen.push(SocketAddr::new(ip, s.port));
                }
                continue;
            }
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
}
