//! One `<mount type="normal|default">` of an `icecast.xml` as Icecast 2.4.4 holds it
//! (`mount_proxy`), [`RawMount`], and the merge of a `type="default"` mount into a normal one
//! (`merge_mounts`, with the fnmatch of `config_find_mount`). Values are kept raw here (`-1` or
//! `0` meaning "not set", paths unresolved) so that the merge follows Icecast's rules exactly;
//! [`RawMount::to_config`] turns the result into a `[[mount]]`. The reading of `<mount>` is in
//! `mounts.rs`; of the import's own files, this one imports only the path resolver.

use std::path::Path;

use super::resolver::Resolver;
use crate::config::hooks::HookConfig;
use crate::config::{AuthConfig, HttpHeader, MountConfig, UrlAuthConfig};

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
    /// `<charset>` when not UTF-8 (a label `encoding_rs` knows).
    pub charset: Option<String>,
    /// Icecast-KH `<limit-rate>` in bits per second.
    pub limit_rate: Option<u64>,
    /// `<dump-file>` as written (a strftime pattern).
    pub dump_file: Option<String>,
    /// Icecast 2.5 `<dump-file-size-limit>` in bytes.
    pub dump_file_size_limit: Option<u64>,
    /// Icecast 2.5 `<dump-file-time-limit>` in seconds.
    pub dump_file_time_limit: Option<u64>,
    /// `<event-bindings>` and Icecast-KH `<on-connect>`/`<on-disconnect>`, in document order.
    pub hooks: Vec<HookConfig>,
    /// `<mp3-metadata-interval>` in bytes.
    pub metaint: Option<u32>,
    /// `<cluster-password>` (YP `cpswd`).
    pub cluster_password: Option<String>,
}

impl RawMount {
    /// A mount of type `kind` with nothing set (Icecast's fresh `mount_proxy`).
    pub fn new(kind: MountType) -> RawMount {
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
            charset: None,
            limit_rate: None,
            dump_file: None,
            dump_file_size_limit: None,
            dump_file_time_limit: None,
            hooks: Vec::new(),
            metaint: None,
            cluster_password: None,
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
        opt(&mut self.charset, &src.charset);
        opt(&mut self.dump_file, &src.dump_file);
        opt(&mut self.cluster_password, &src.cluster_password);
        self.dump_file_size_limit = self.dump_file_size_limit.or(src.dump_file_size_limit);
        self.dump_file_time_limit = self.dump_file_time_limit.or(src.dump_file_time_limit);
        self.metaint = self.metaint.or(src.metaint);
        if self.hooks.is_empty() {
            self.hooks.clone_from(&src.hooks);
        }
        self.limit_rate = self.limit_rate.or(src.limit_rate);
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
    pub fn to_config(&self, resolver: &Resolver, webroot: &Path) -> MountConfig {
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
            hls: None,
            hls_segment_seconds: None,
            hls_window: None,
            charset: self.charset.clone(),
            limit_rate: self.limit_rate,
            dump_file: self
                .dump_file
                .as_deref()
                .map(|d| resolver.path(d).display().to_string()),
            dump_file_size_limit: self.dump_file_size_limit,
            dump_file_time_limit: self.dump_file_time_limit,
            hook: self.hooks.clone(),
            mp3_metadata_interval: self.metaint,
            cluster_password: self.cluster_password.clone(),
            hls_playlists: None,
            hls_aac_segments: None,
            hls_low_latency: None,
            hls_secure_link_secret: None,
        }
    }
}
