//! `<relay>`s (`cfgfile.c:_parse_relay`) and the master-server settings of an `icecast.xml`
//! (`<master-server>`, `<master-server-port>`, `<master-username>`, `<master-password>`,
//! `<master-update-interval>`, `<relays-on-demand>`, used by `slave.c`), turned into
//! `[[relay]]` and `[master]`.

use super::error::IcecastXmlError;
use super::importer::Importer;
use super::report::UnsupportedKind;
use super::tree::Element;
use crate::config::{MasterConfig, RelayConfig};

impl Importer<'_> {
    /// `<relay>`, as `_parse_relay`: on-demand defaults to `<relays-on-demand>` as read so far.
    pub(super) fn relay(&mut self, path: &str, el: &Element) -> Result<(), IcecastXmlError> {
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

    /// `[master]` when Icecast would poll a master: it needs the server, a port and a password
    /// (`slave.c:update_from_master`).
    pub(super) fn finish_master(&mut self) {
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
