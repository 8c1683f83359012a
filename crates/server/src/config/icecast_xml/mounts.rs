//! `<mount type="normal|default">` of an `icecast.xml`, read as Icecast 2.4.4
//! `cfgfile.c:_parse_mount` reads it (per-mount elements, `<http-headers>` and the listener
//! `<authentication>` of `auth.c:auth_get_authenticator`), into a [`RawMount`] that keeps the
//! values raw (`-1` or `0` meaning "not set", paths unresolved); the merge of `type="default"`
//! mounts and the conversion to `[[mount]]` are in `raw_mount.rs`. This file extends the
//! [`Importer`] with the methods that read a mount.

use super::error::IcecastXmlError;
use super::importer::Importer;
use super::raw_mount::{MountType, RawAuth, RawMount};
use super::report::UnsupportedKind as K;
use super::tree::Element;
use crate::config::hooks::{HookConfig, TRIGGERS};
use crate::config::UrlAuthConfig;

/// What a per-mount element that Throng has no setting for does in Icecast.
fn unsupported_mount_element(name: &str) -> Option<&'static str> {
    Some(match name {
        "no-mount" => "Throng has no setting to refuse listeners on a mount",
        "source-timeout" => {
            "per-mount source timeout; Throng has the global `limits.source-timeout`"
        }
        "type" | "subtype" => "Throng takes the content type from the source",
        _ => return None,
    })
}

/// Whether `label` names UTF-8 (`UTF8`, `UTF-8`, any case), Throng's own charset.
fn is_utf8_label(label: &str) -> bool {
    label.eq_ignore_ascii_case("utf8") || label.eq_ignore_ascii_case("utf-8")
}

/// The encoding of an Icecast `<charset>` label: a WHATWG label (`latin1`, `iso-8859-1`), or
/// iconv's spelling without the dash Icecast documents (`ISO8859-1`).
pub(crate) fn charset_label(label: &str) -> Option<&'static encoding_rs::Encoding> {
    crate::config::charset_encoding(label)
}

impl Importer<'_> {
    /// Icecast 2.5's `<event-bindings>`: each `<event type="exec|url" trigger=...>` with its
    /// `<option>`s (`event_exec.c`: `executable`, `default_arguments`, `type="argument"`;
    /// `event_url.c`: `url`, `username`, `password`, `action`). Other types (`log`,
    /// `terminate`) and triggers Throng does not raise are reported.
    pub(super) fn event_bindings(
        &mut self,
        path: &str,
        el: &Element,
        ctx: Option<&str>,
    ) -> Vec<HookConfig> {
        let mut out = Vec::new();
        for ev in &el.children {
            let p = format!("{path}/{}", ev.name);
            let trigger = ev.attr("trigger").unwrap_or_default();
            let kind = ev.attr("type").unwrap_or_default();
            if ev.name != "event" || !matches!(kind, "exec" | "url") {
                self.report(
                    &p,
                    ctx,
                    K::NotSupported,
                    format!("event type {kind:?} (only exec and url)"),
                );
                continue;
            }
            if !TRIGGERS.contains(&trigger) {
                self.report(
                    &p,
                    ctx,
                    K::NotSupported,
                    format!(
                        "trigger {trigger:?} (Throng raises {})",
                        TRIGGERS.join(", ")
                    ),
                );
                continue;
            }
            let mut h = HookConfig {
                trigger: trigger.to_owned(),
                ..HookConfig::default()
            };
            for o in &ev.children {
                let value = o.attr("value").map(str::to_owned);
                match (o.attr("type"), o.attr("name")) {
                    (Some("argument"), _) => h.arguments.extend(value),
                    (_, Some("executable")) if kind == "exec" => h.exec = value.map(Into::into),
                    (_, Some("default_arguments")) => h.default_arguments = value,
                    (_, Some("url")) if kind == "url" => h.url = value,
                    (_, Some("username")) => h.username = value,
                    (_, Some("password")) => h.password = value,
                    (_, Some("action")) => h.action = value,
                    _ => self.report(
                        &format!("{p}/{}", o.name),
                        ctx,
                        K::IgnoredByIcecast,
                        "not an option of this event type",
                    ),
                }
            }
            match h.check(&p) {
                Ok(()) => out.push(h),
                Err(e) => self.report(&p, ctx, K::IgnoredByIcecast, e),
            }
        }
        out
    }

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
                "charset" => match text().as_deref().map(str::trim) {
                    // What Throng does anyway: titles are UTF-8.
                    None => {}
                    Some(label) if is_utf8_label(label) => m.charset = None,
                    Some(label) if charset_label(label).is_some() => {
                        m.charset = Some(label.to_owned())
                    }
                    Some(label) => self.report(
                        &p,
                        ctx,
                        K::NotSupported,
                        format!("unknown character set {label:?}: titles are taken as UTF-8"),
                    ),
                },
                // Icecast-KH: the script gets the mount as its one argument (2.5's `legacy`).
                "on-connect" | "on-disconnect" => {
                    if let Some(exe) = text() {
                        m.hooks.push(HookConfig {
                            trigger: if c.name == "on-connect" {
                                "source-connect"
                            } else {
                                "source-disconnect"
                            }
                            .into(),
                            exec: Some(exe.into()),
                            ..HookConfig::default()
                        });
                    }
                }
                "event-bindings" => {
                    let mut h = self.event_bindings(&p, c, ctx);
                    m.hooks.append(&mut h);
                }
                "cluster-password" => m.cluster_password = text(),
                "mp3-metadata-interval" => {
                    m.metaint = self.unsigned(&p, c, "an interval in bytes")?;
                }
                "dump-file" => m.dump_file = text(),
                "dump-file-size-limit" => {
                    m.dump_file_size_limit = self.unsigned(&p, c, "a size in bytes")?;
                }
                "dump-file-time-limit" => {
                    m.dump_file_time_limit = self.unsigned(&p, c, "a number of seconds")?;
                }
                "limit-rate" => {
                    if let Some(v) = self.unsigned::<u64>(&p, c, "a rate in bits per second")? {
                        m.limit_rate = (v > 0).then_some(v);
                    }
                }
                // AzuraCast writes the public URL of each mount; Throng's status documents
                // build `listenurl` from `hostname` and the listen port, as Icecast 2.4.4 does.
                "listenurl" => self.report(
                    &p,
                    ctx,
                    K::Accepted,
                    "not an Icecast 2.4.4 setting; listenurl is built from <hostname> and the port",
                ),
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
