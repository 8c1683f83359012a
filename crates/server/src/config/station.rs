//! `[station]`: who the station is, for listeners: its `name`, `description`, `logo` and `url`
//! (its own web site). The station page shows them in its heading and page title, and puts
//! the name and logo into the players' metadata (Media Session: lock screens, headsets).
//! Nothing here changes what the server sends to stream clients (that is `server-id` and each
//! mount's `stream-name`). Icecast has no station-wide name: an icecast.xml import fills
//! `name`, `description` and `url` from the `<stream-name>`, `<stream-description>` and
//! `<stream-url>` its mounts agree on ([`StationConfig::from_mounts`]); unset, the page shows
//! the host name the visitor typed.

use serde::{Deserialize, Serialize};

/// `[station]`: the station's identity on the station page (all empty by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct StationConfig {
    /// The station's name: the page heading and title, the Media Session album.
    pub name: String,
    /// One line under the heading.
    pub description: String,
    /// The logo image: an absolute `http(s)` URL, or a path on this server starting with `/`
    /// (e.g. `/static/logo.png` from `[paths] webroot`). Also the lock-screen artwork when a
    /// title has no cover art of its own.
    pub logo: String,
    /// The station's web site (an absolute `http(s)` URL), linked from the heading.
    pub url: String,
}

impl StationConfig {
    /// The station an icecast.xml describes through its mounts, given each mount's
    /// `[stream-name, stream-description, stream-url]`: each of `name`, `description` and
    /// `url` is the value every mount that sets one agrees on (none when they differ). A
    /// `stream-url` that [`StationConfig::check`] would refuse is left out.
    pub fn from_mounts(mounts: &[[Option<&str>; 3]]) -> StationConfig {
        let agreed = |i: usize| {
            let set: std::collections::BTreeSet<&str> =
                mounts.iter().filter_map(|m| m[i]).collect();
            match set.len() {
                1 => set.into_iter().next().unwrap_or_default().to_owned(),
                _ => String::new(),
            }
        };
        let mut s = StationConfig {
            name: agreed(0),
            description: agreed(1),
            logo: String::new(),
            url: agreed(2),
        };
        if !(is_web_url(&s.url) && plain(&s.url)) {
            s.url.clear();
        }
        if s.check().is_err() {
            s.name.clear();
            s.description.clear();
        }
        s
    }

    /// Whether nothing is set (the section is then left out of a written configuration).
    pub fn is_default(&self) -> bool {
        *self == StationConfig::default()
    }

    /// Checks `logo` and `url`: they go into `<img src>` and `<a href>` of every visitor's
    /// page, so only `http(s)` URLs (and, for `logo`, a local path) without spaces, quotes or
    /// control characters are accepted. Errors: the key and why, e.g.
    /// ``"`station.url` must be an absolute http(s) URL"``.
    pub fn check(&self) -> Result<(), String> {
        // `//host/x` is another site's file, not a path on this server.
        let local = self.logo.starts_with('/') && !self.logo.starts_with("//");
        if !self.logo.is_empty() && !local && !is_web_url(&self.logo) {
            return Err(
                "`station.logo` must be an absolute http(s) URL or a path starting with /".into(),
            );
        }
        if !plain(&self.logo) {
            return Err("`station.logo` has a space, quote or control character".into());
        }
        if !self.url.is_empty() && (!is_web_url(&self.url) || !plain(&self.url)) {
            return Err("`station.url` must be an absolute http(s) URL".into());
        }
        if [&self.name, &self.description]
            .iter()
            .any(|s| s.chars().any(char::is_control))
        {
            return Err("`station.name` and `station.description` must be one line".into());
        }
        Ok(())
    }
}

fn is_web_url(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    (l.starts_with("https://") || l.starts_with("http://")) && s.len() > "http://".len() + 1
}

fn plain(s: &str) -> bool {
    !s.chars()
        .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        let ok = StationConfig {
            name: "Radio Ö".into(),
            description: "Songs".into(),
            logo: "/static/logo.png".into(),
            url: "https://radio.example/".into(),
        };
        assert_eq!(ok.check(), Ok(()));
        assert!(StationConfig::default().check().is_ok());
        let bad = |f: fn(&mut StationConfig)| {
            let mut s = ok.clone();
            f(&mut s);
            s.check().unwrap_err()
        };
        assert!(bad(|s| s.url = "javascript:alert(1)".into()).contains("station.url"));
        assert!(bad(|s| s.url = "/relative".into()).contains("station.url"));
        assert!(bad(|s| s.logo = "data:image/png;base64,x".into()).contains("station.logo"));
        assert!(bad(|s| s.logo = "//evil.example/x.png".into()).contains("station.logo"));
        assert!(bad(|s| s.logo = "/a\" onerror=x".into()).contains("station.logo"));
        assert!(bad(|s| s.name = "a\nb".into()).contains("station.name"));
    }

    #[test]
    fn imported_from_what_the_mounts_agree_on() {
        let s = StationConfig::from_mounts(&[
            [Some("Radio X"), None, Some("https://x.example/")],
            [Some("Radio X"), Some("Jazz"), None],
            [None, None, Some("https://x.example/")],
        ]);
        assert_eq!(s.name, "Radio X");
        assert_eq!(s.description, "Jazz");
        assert_eq!(s.url, "https://x.example/");
        let s = StationConfig::from_mounts(&[
            [Some("Radio X"), None, Some("javascript:x")],
            [Some("Radio Y"), None, None],
        ]);
        assert_eq!(s, StationConfig::default());
    }

    #[test]
    fn parsed_from_toml() {
        let s: StationConfig = toml::from_str("name = \"R\"\nlogo = \"https://x/l.png\"").unwrap();
        assert_eq!(s.name, "R");
        assert_eq!(s.logo, "https://x/l.png");
        assert!(toml::from_str::<StationConfig>("nmae = \"R\"").is_err());
    }
}
