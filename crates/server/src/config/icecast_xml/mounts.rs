//! `<mount type="normal|default">` of an `icecast.xml`, as Icecast 2.4.4 `cfgfile.c:_parse_mount`
//! reads it, and the merge of `type="default"` settings into every normal mount
//! (`merge_mounts`, `_merge_mounts_all`, `config_find_mount`). Values are kept raw here (`-1` or
//! `0` meaning "not set", paths unresolved) so that the merge follows Icecast's rules exactly;
//! [`RawMount::to_config`] turns the result into a `[[mount]]`.

use crate::config::{AuthConfig, HttpHeader, MountConfig, UrlAuthConfig};

use super::{IcecastXmlError, Resolver};
use super::{Importer, UnsupportedKind as K};
use crate::config::icecast_xml::tree::Element;

/// `type` attribute of a `<mount>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MountType {
    /// A mount (or fnmatch pattern) of its own.
    Normal,
    /// Defaults for every normal mount, and the settings of mounts without a normal one.
    Default,
}

/// A mount's listener authentication before path resolution.
#[derive(Debug, Clone)]
pub(super) enum RawAuth {
    /// `type="htpasswd"` with its `filename` option as written and `allow_duplicate_users`.
    Htpasswd(String, bool),
    /// `type="url"`.
    Url(Box<UrlAuthConfig>),
}

/// One `<mount>` as Icecast holds it in `mount_proxy`: `-1` (max-listeners, burst-size,
/// public) or `0` (queue-size, max-listener-duration) for "not set".
#[derive(Debug, Clone)]
pub(super) struct RawMount {
    /// `type=` attribute.
    pub kind: MountType,
    /// `<mount-name>`: the mount, or for a default mount an fnmatch pattern.
    pub name: Option<String>,
    /// `<username>`: source user of this mount.
    pub username: Option<String>,
    /// `<password>`: source password of this mount.
    pub password: Option<String>,
    /// `<intro>`: a file name in the webroot, as written.
    pub intro: Option<String>,
    /// `<fallback-mount>`: a mount or webroot file name.
    pub fallback_mount: Option<String>,
    /// `<fallback-override>`.
    pub fallback_override: bool,
    /// `<fallback-when-full>`.
    pub fallback_when_full: bool,
    /// `<max-listeners>`, `-1` when unset.
    pub max_listeners: i64,
    /// `<burst-size>` in bytes, `-1` when unset.
    pub burst_size: i64,
    /// `<queue-size>` in bytes, `0` when unset.
    pub queue_size: i64,
    /// `<hidden>`.
    pub hidden: bool,
    /// `<max-listener-duration>` in seconds, `0` when unset.
    pub max_listener_duration: i64,
    /// `<stream-name>`.
    pub stream_name: Option<String>,
    /// `<stream-description>`.
    pub stream_description: Option<String>,
    /// `<stream-url>`.
    pub stream_url: Option<String>,
    /// `<genre>`.
    pub genre: Option<String>,
    /// `<bitrate>` as written (kbit/s).
    pub bitrate: Option<String>,
    /// `<public>` as written (`<no-yp>1` sets 0), `-1` when unset.
    pub public: i64,
    /// `<http-headers>`, in document order.
    pub http_headers: Vec<HttpHeader>,
    /// `<authentication>`, not merged from default mounts.
    pub auth: Option<RawAuth>,
}

impl RawMount {
    fn new(kind: MountType) -> RawMount {
        RawMount {
            kind,
            name: None,
            username: None,
            password: None,
            intro: None,
            fallback_mount: None,
            fallback_override: false,
            fallback_when_full: false,
            max_listeners: -1,
            burst_size: -1,
            queue_size: 0,
            hidden: false,
            max_listener_duration: 0,
            stream_name: None,
            stream_description: None,
            stream_url: None,
            genre: None,
            bitrate: None,
            public: -1,
            http_headers: Vec::new(),
            auth: None,
        }
    }

    /// Whether this default mount applies to normal mount `name`, as `config_find_mount`: no
    /// `mount-name`, or an fnmatch(`FNM_PATHNAME`) match.
    pub fn default_applies_to(&self, name: &str) -> bool {
        match &self.name {
            None => true,
            Some(pattern) => {
                let opts = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: false,
                };
                pattern == name
                    || glob::Pattern::new(pattern).is_ok_and(|p| p.matches_with(name, opts))
            }
        }
    }

    /// Fills what this normal mount leaves unset from default mount `src`, as Icecast 2.4.4
    /// `merge_mounts`: flags are OR-ed, the default's headers come after the mount's own, and
    /// the authenticator is not merged (a `TODO` in 2.4.4).
    pub fn merge_default(&mut self, src: &RawMount) {
        fn opt(dst: &mut Option<String>, src: &Option<String>) {
            if dst.is_none() {
                dst.clone_from(src);
            }
        }
        opt(&mut self.username, &src.username);
        opt(&mut self.password, &src.password);
        opt(&mut self.intro, &src.intro);
        opt(&mut self.fallback_mount, &src.fallback_mount);
        opt(&mut self.stream_name, &src.stream_name);
        opt(&mut self.stream_description, &src.stream_description);
        opt(&mut self.stream_url, &src.stream_url);
        opt(&mut self.genre, &src.genre);
        opt(&mut self.bitrate, &src.bitrate);
        self.fallback_when_full |= src.fallback_when_full;
        self.fallback_override |= src.fallback_override;
        self.hidden |= src.hidden;
        if self.max_listeners == -1 {
            self.max_listeners = src.max_listeners;
        }
        if self.burst_size == -1 {
            self.burst_size = src.burst_size;
        }
        if self.queue_size == 0 {
            self.queue_size = src.queue_size;
        }
        if self.max_listener_duration == 0 {
            self.max_listener_duration = src.max_listener_duration;
        }
        if self.public == -1 {
            self.public = src.public;
        }
        self.http_headers.extend(src.http_headers.iter().cloned());
    }

    /// The `[[mount]]`; a default mount without `mount-name` becomes the glob `/*`. `intro` is
    /// a file in the webroot (Icecast prefixes it with `webroot/`), htpasswd files resolve
    /// like every other path; a url authenticator gets Icecast's fixed 15 s libcurl timeout.
    pub fn to_config(&self, resolver: &Resolver, webroot: &std::path::Path) -> MountConfig {
        MountConfig {
            name: self.name.clone().unwrap_or_else(|| "/*".to_owned()),
            username: self.username.clone(),
            password: self.password.clone(),
            // Any negative value is unlimited: Icecast compares against it as unsigned.
            max_listeners: u32::try_from(self.max_listeners).ok(),
            stream_name: self.stream_name.clone(),
            stream_description: self.stream_description.clone(),
            stream_url: self.stream_url.clone(),
            genre: self.genre.clone(),
            bitrate: self.bitrate.clone(),
            public: (self.public != -1).then_some(self.public != 0),
            hidden: self.hidden,
            queue_size: usize::try_from(self.queue_size).ok().filter(|&q| q > 0),
            burst_size: usize::try_from(self.burst_size).ok(),
            fallback_mount: self.fallback_mount.clone(),
            fallback_override: self.fallback_override,
            fallback_when_full: self.fallback_when_full,
            intro: self
                .intro
                .as_ref()
                .map(|i| webroot.join(i.trim_start_matches('/'))),
            max_listener_duration: u64::try_from(self.max_listener_duration)
                .ok()
                .filter(|&d| d > 0),
            file: None,
            authentication: self.auth.as_ref().map(|a| match a {
                RawAuth::Htpasswd(f, dup) => AuthConfig::Htpasswd {
                    filename: resolver.path(f),
                    allow_duplicate_users: *dup,
                },
                RawAuth::Url(u) => AuthConfig::Url(u.clone()),
            }),
            http_headers: self.http_headers.clone(),
        }
    }
}

/// What a per-mount element that Throng has no setting for does in Icecast.
fn unsupported_mount_element(name: &str) -> Option<&'static str> {
    Some(match name {
        "dump-file" => "Throng does not dump streams to files",
        "on-connect" | "on-disconnect" => {
            "Throng does not run scripts on source connect/disconnect"
        }
        "charset" => "Throng does not convert metadata from other character sets",
        "mp3-metadata-interval" => "per-mount ICY interval; Throng has one global `limits.metaint`",
        "no-mount" => "Throng has no setting to refuse listeners on a mount",
        "cluster-password" => "YP cluster passwords (YP is not supported)",
        "source-timeout" => {
            "per-mount source timeout; Throng has the global `limits.source-timeout`"
        }
        "type" | "subtype" => "Throng takes the content type from the source",
        _ => return None,
    })
}

impl Importer<'_> {
    /// Reads one `<mount>`; `None` when Icecast would drop it (unknown type, no `mount-name`
    /// on a normal mount, a name that no request can match).
    pub(super) fn mount(
        &mut self,
        path: &str,
        el: &Element,
    ) -> Result<Option<RawMount>, IcecastXmlError> {
        let kind = match el.attr("type") {
            None | Some("normal") => MountType::Normal,
            Some("default") => MountType::Default,
            Some(other) => {
                self.report(
                    &format!("{path}/@type"),
                    None,
                    K::IgnoredByIcecast,
                    format!("unknown mount type {other:?}: Icecast drops the whole <mount>"),
                );
                return Ok(None);
            }
        };
        let mut m = RawMount::new(kind);
        m.name = el
            .children
            .iter()
            .rev()
            .find(|c| c.name == "mount-name")
            .and_then(|c| c.text().map(str::to_owned));
        let context = match (&m.name, kind) {
            (Some(n), MountType::Normal) => format!("mount {n}"),
            (Some(n), MountType::Default) => format!("default mount {n}"),
            (None, MountType::Normal) => "mount without name".to_owned(),
            (None, MountType::Default) => "default mount".to_owned(),
        };
        let ctx = Some(context.as_str());
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            let text = || c.text().map(str::to_owned);
            match c.name.as_str() {
                "mount-name" => {}
                "username" => m.username = text(),
                "password" => m.password = text(),
                "intro" => m.intro = text(),
                "fallback-mount" => m.fallback_mount = text(),
                "stream-name" => m.stream_name = text(),
                "stream-description" => m.stream_description = text(),
                "stream-url" => m.stream_url = text(),
                "genre" => m.genre = text(),
                "bitrate" => m.bitrate = text(),
                "fallback-override" => {
                    if let Some(v) = self.flag(&p, c, ctx)? {
                        m.fallback_override = v;
                    }
                }
                "fallback-when-full" => {
                    if let Some(v) = self.flag(&p, c, ctx)? {
                        m.fallback_when_full = v;
                    }
                }
                "hidden" => {
                    if let Some(v) = self.flag(&p, c, ctx)? {
                        m.hidden = v;
                    }
                }
                "max-listeners" => {
                    if let Some(v) = self.int(&p, c, ctx)? {
                        m.max_listeners = v;
                    }
                }
                "burst-size" => {
                    if let Some(v) = self.int(&p, c, ctx)? {
                        m.burst_size = v;
                    }
                }
                "queue-size" => {
                    if let Some(v) = self.int(&p, c, ctx)? {
                        m.queue_size = v;
                    }
                }
                "max-listener-duration" => {
                    if let Some(v) = self.int(&p, c, ctx)? {
                        m.max_listener_duration = v;
                    }
                }
                "public" => {
                    if let Some(v) = self.int(&p, c, ctx)? {
                        m.public = v;
                    }
                }
                "no-yp" => {
                    if let Some(v) = self.flag(&p, c, ctx)? {
                        m.public = if v { 0 } else { -1 };
                    }
                }
                "http-headers" => {
                    let mut h = self.http_headers(&p, c, ctx);
                    m.http_headers.append(&mut h);
                }
                "authentication" => m.auth = self.mount_auth(&p, c, ctx)?,
                other => match unsupported_mount_element(other) {
                    Some(note) => self.report(&p, ctx, K::NotSupported, note),
                    None => self.unknown(&p, ctx),
                },
            }
        }
        match (&m.name, kind) {
            (None, MountType::Normal) => {
                self.report(
                    path,
                    None,
                    K::IgnoredByIcecast,
                    "a normal <mount> without <mount-name> is dropped by Icecast",
                );
                return Ok(None);
            }
            (Some(n), _) if !n.starts_with('/') => {
                self.report(
                    &format!("{path}/mount-name"),
                    ctx,
                    K::IgnoredByIcecast,
                    "a mount name not starting with / never matches a request",
                );
                return Ok(None);
            }
            _ => {}
        }
        Ok(Some(m))
    }

    /// A mount's `<authentication type="htpasswd|url">` with its `<option name= value=>`s, as
    /// Icecast 2.4.4 `auth.c:auth_get_authenticator`. An authenticator Icecast cannot build
    /// (no or unknown type) leaves the mount open, as in Icecast.
    fn mount_auth(
        &mut self,
        path: &str,
        el: &Element,
        ctx: Option<&str>,
    ) -> Result<Option<RawAuth>, IcecastXmlError> {
        let mut options = Vec::new();
        for c in &el.children {
            let p = format!("{path}/{}", c.name);
            if c.name != "option" {
                self.report(&p, ctx, K::IgnoredByIcecast, "only <option> is read here");
                continue;
            }
            match (c.attr("name"), c.attr("value")) {
                (Some(n), Some(v)) => options.push((n.to_owned(), v.to_owned(), p)),
                _ => self.report(
                    &p,
                    ctx,
                    K::IgnoredByIcecast,
                    "an <option> needs both name= and value=",
                ),
            }
        }
        let kind = el.attr("type");
        let mut url = UrlAuthConfig {
            // libcurl's CURLOPT_TIMEOUT in Icecast 2.4.4 `auth_url.c`.
            timeout: Some(15),
            ..UrlAuthConfig::default()
        };
        let mut filename = None;
        let mut duplicates = false;
        for (name, value, p) in options {
            let p = format!("{p}[@name={name}]");
            let slot = match (kind, name.as_str()) {
                (_, "allow_duplicate_users") => {
                    duplicates = value.trim().parse::<i64>().is_ok_and(|v| v != 0);
                    url.allow_duplicate_users = duplicates;
                    continue;
                }
                (Some("htpasswd"), "filename") => {
                    filename = Some(value);
                    continue;
                }
                (Some("url"), "username") => &mut url.username,
                (Some("url"), "password") => &mut url.password,
                (Some("url"), "headers") => &mut url.headers,
                (Some("url"), "header_prefix") => &mut url.header_prefix,
                (Some("url"), "listener_add") => &mut url.listener_add,
                (Some("url"), "listener_remove") => &mut url.listener_remove,
                (Some("url"), "mount_add") => &mut url.mount_add,
                (Some("url"), "mount_remove") => &mut url.mount_remove,
                (Some("url"), "stream_auth") => &mut url.stream_auth,
                (Some("url"), "auth_header") => &mut url.auth_header,
                (Some("url"), "timelimit_header") => &mut url.timelimit_header,
                _ => {
                    self.report(
                        &p,
                        ctx,
                        K::IgnoredByIcecast,
                        "not an option of this authenticator in Icecast 2.4.4",
                    );
                    continue;
                }
            };
            *slot = Some(value);
        }
        match kind {
            Some("url") => Ok(Some(RawAuth::Url(Box::new(url)))),
            Some("htpasswd") => match filename {
                Some(f) => Ok(Some(RawAuth::Htpasswd(f, duplicates))),
                None => Err(IcecastXmlError::BadValue {
                    path: path.to_owned(),
                    value: String::new(),
                    expected: "an <option name=\"filename\" value=...> (Icecast refuses every listener without it)",
                }),
            },
            None => {
                self.report(
                    path,
                    ctx,
                    K::IgnoredByIcecast,
                    "no type= attribute: Icecast builds no authenticator and leaves the mount open",
                );
                Ok(None)
            }
            Some(t) => {
                self.report(
                    &format!("{path}/@type"),
                    ctx,
                    K::NotSupported,
                    format!(
                        "authenticator type {t:?} (only htpasswd and url); the mount stays open, as in Icecast 2.4.4"
                    ),
                );
                Ok(None)
            }
        }
    }
}
