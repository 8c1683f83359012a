//! `[cluster]`: an origin and its edges (docs/SCALING.md). An edge is a Throng that relays the
//! origin's mounts (`[[relay]]` or `[master]`) and, with `origin` set here, reports to the origin
//! every `report-interval` seconds (`POST /api/v1/cluster/edges`, HTTP Basic user `edge` with
//! the shared `secret`). The origin keeps the edges that reported within `edge-timeout` and,
//! as Icecast-KH's `master-redirect`, answers a listener it has no room for with `302` to the
//! edge with the most room (`redirect = "overflow"`, the default), or every listener
//! (`redirect = "all"`: a pure director).

use serde::{Deserialize, Serialize};

/// When the origin sends listeners to its edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RedirectMode {
    /// Only a listener the origin cannot take (mount `max-listeners`, `clients` reached) is
    /// redirected, when an edge carrying the mount has room (Icecast-KH).
    #[default]
    Overflow,
    /// Every listener of a mount some edge carries is redirected: the origin serves only the
    /// edges (and listeners when no edge has room).
    All,
    /// Never redirect; registered edges are only shown.
    Off,
}

/// `[cluster]`: see the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ClusterConfig {
    /// On an edge: the origin's base URL (`http://origin.example.com:8000`) to report to. None
    /// (the default) on an origin or a stand-alone server.
    pub origin: Option<String>,
    /// On an edge: its own base URL as listeners reach it (`http://edge1.example.com:8000`);
    /// the origin's redirects point there. Needed with `origin`.
    pub public_url: Option<String>,
    /// The shared cluster secret: an edge reports with HTTP Basic user `edge` and this
    /// password; the origin accepts those credentials (or its admin's). Needed with `origin`.
    pub secret: Option<String>,
    /// On an edge: seconds between two reports (default 5).
    pub report_interval: u64,
    /// On an edge: listeners it advertises room for (0, the default: its `clients` limit).
    pub capacity: u64,
    /// On the origin: seconds after its last report an edge is dropped (default 15).
    pub edge_timeout: u64,
    /// On the origin: when listeners are redirected to edges (default `overflow`).
    pub redirect: RedirectMode,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            origin: None,
            public_url: None,
            secret: None,
            report_interval: 5,
            capacity: 0,
            edge_timeout: 15,
            redirect: RedirectMode::Overflow,
        }
    }
}

impl ClusterConfig {
    /// Checks the keys: an edge needs `public-url` and `secret`; URLs are `http://`; intervals
    /// are 1 to 3600 s.
    ///
    /// Errors: the message naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=3600).contains(&self.report_interval) {
            return Err("`cluster.report-interval` must be 1..=3600 seconds".into());
        }
        if !(1..=3600).contains(&self.edge_timeout) {
            return Err("`cluster.edge-timeout` must be 1..=3600 seconds".into());
        }
        for (key, url) in [("origin", &self.origin), ("public-url", &self.public_url)] {
            if let Some(u) = url {
                if !u.starts_with("http://") && !u.starts_with("https://") {
                    return Err(format!(
                        "`cluster.{key}` must be an http:// or https:// URL"
                    ));
                }
            }
        }
        if let Some(u) = &self.origin {
            if !u.starts_with("http://") {
                return Err("`cluster.origin`: reports go over http:// only".into());
            }
            if self.public_url.is_none() {
                return Err("`cluster.origin` needs `cluster.public-url`".into());
            }
            if self.secret.as_deref().is_none_or(str::is_empty) {
                return Err("`cluster.origin` needs `cluster.secret`".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_needs_its_url_and_the_secret() {
        let mut c = ClusterConfig {
            origin: Some("http://127.0.0.1:8000".into()),
            ..ClusterConfig::default()
        };
        assert!(c.validate().unwrap_err().contains("public-url"));
        c.public_url = Some("http://127.0.0.1:8001".into());
        assert!(c.validate().unwrap_err().contains("secret"));
        c.secret = Some("s3cret".into());
        assert_eq!(c.validate(), Ok(()));
        c.public_url = Some("edge1:8001".into());
        assert!(c.validate().is_err());
        assert_eq!(ClusterConfig::default().validate(), Ok(()));
    }
}
