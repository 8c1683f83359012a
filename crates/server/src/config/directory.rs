//! `[[directory]]`: YP directories the public mounts are listed in, as Icecast's
//! `<directory>` (`yp-url`, `yp-url-timeout`, `touch-interval`). What is sent is `yp/`.

use serde::{Deserialize, Serialize};

/// One YP directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct DirectoryConfig {
    /// The directory's CGI, e.g. `http://dir.xiph.org/cgi-bin/yp-cgi` (Icecast `<yp-url>`).
    pub yp_url: String,
    /// Seconds a request to it may take (Icecast `<yp-url-timeout>`, default 15).
    pub yp_url_timeout: u64,
    /// Seconds between touches unless the directory's `TouchFreq` says otherwise (Icecast
    /// `<touch-interval>`, default 600; at least 30).
    pub touch_interval: u64,
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        DirectoryConfig {
            yp_url: String::new(),
            yp_url_timeout: 15,
            touch_interval: 600,
        }
    }
}

impl DirectoryConfig {
    /// Checks the URL (plain `http://`, as Icecast's libcurl calls take it here).
    pub fn check(&self, where_: &str) -> Result<(), String> {
        throng_proto::url_auth::CallbackUrl::parse(&self.yp_url)
            .map(|_| ())
            .map_err(|e| format!("{where_}.yp-url: {e}"))
    }
}
