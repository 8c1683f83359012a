//! What a hook is given, pure: an [`Event`] (trigger, mount, source), and from it the argument
//! list and environment of an `exec` hook (Icecast 2.5 `event_exec.c`: `__setup_argv`,
//! `__setup_environ`) and the form fields of a `url` hook (Icecast 2.5 `event_url.c`, its
//! legacy field set, escaped as Icecast's `util_url_escape`).

use std::path::Path;

use throng_proto::url_auth::escape;

use crate::config::hooks::HookConfig;

/// One event on a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Icecast 2.5's trigger name (`source-connect`, ...).
    pub trigger: &'static str,
    /// The mount (Icecast's `EVENT_URI`).
    pub mount: String,
    /// The feed's id (Icecast's connection id).
    pub client_id: u64,
    /// When the feed started (Unix seconds).
    pub connected_at: i64,
    /// Seconds the feed has run.
    pub duration: u64,
    /// `source`, or `relay`/`file` for the other feeds (Icecast's client role).
    pub role: &'static str,
    /// The source's user name.
    pub username: String,
    /// The source's address, when it is a client.
    pub ip: Option<String>,
    /// The source's User-Agent, when known.
    pub agent: Option<String>,
    /// The stream's content type.
    pub media_type: String,
    /// The mount's `stream-name`, `stream-description`, `stream-url`, `genre`.
    pub stream: [Option<String>; 4],
    /// Whether the mount is public (YP) and hidden.
    pub public: bool,
    /// Whether the mount is hidden from the status pages.
    pub hidden: bool,
    /// The current title (for `format-metadata-changed`).
    pub title: String,
}

/// Server-wide values every hook gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `hostname`.
    pub hostname: String,
    /// `admin-email`.
    pub admin: String,
    /// The directory of the error log, when it is a file.
    pub logdir: String,
    /// The port in `listenurl`.
    pub port: u16,
}

/// The version string scripts see (`ICECAST_VERSION`).
pub fn version() -> String {
    format!(
        "Icecast 2.5.0 compatible (Throng {})",
        env!("CARGO_PKG_VERSION")
    )
}

/// `argv` of an `exec` hook: the program, then by `default-arguments` (`legacy`, the default:
/// the mount; `uri`: the mount; `uri_and_trigger`: the mount and the trigger; `no_defaults`:
/// nothing), then the hook's own `arguments`.
pub fn argv(hook: &HookConfig, exe: &Path, ev: &Event) -> Vec<String> {
    let mut out = vec![exe.display().to_string()];
    match hook.default_arguments.as_deref().unwrap_or("legacy") {
        "no_defaults" => {}
        "uri_and_trigger" => {
            out.push(ev.mount.clone());
            out.push(ev.trigger.to_owned());
        }
        _ => out.push(ev.mount.clone()),
    }
    out.extend(hook.arguments.iter().cloned());
    out
}

/// The environment of an `exec` hook, as Icecast 2.5 sets it (unknown values left out).
pub fn environment(ev: &Event, server: &ServerInfo) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("ICECAST_VERSION", version()),
        ("ICECAST_HOSTNAME", server.hostname.clone()),
        ("ICECAST_ADMIN", server.admin.clone()),
        ("ICECAST_LOGDIR", server.logdir.clone()),
        ("EVENT_TRIGGER", ev.trigger.to_owned()),
        ("SOURCE_ACTION", ev.trigger.to_owned()),
        ("EVENT_URI", ev.mount.clone()),
        ("SOURCE_MEDIA_TYPE", ev.media_type.clone()),
        ("CLIENT_ROLE", ev.role.to_owned()),
        ("CLIENT_USERNAME", ev.username.clone()),
        ("CLIENT_ID", ev.client_id.to_string()),
        ("CLIENT_CONNECTION_TIME", ev.connected_at.to_string()),
        ("CLIENT_ADMIN_COMMAND", "0".to_owned()),
        ("SOURCE_MOUNTPOINT", ev.mount.clone()),
        ("SOURCE_PUBLIC", ev.public.to_string()),
        ("SOURCE_HIDDEN", ev.hidden.to_string()),
    ];
    if let Some(ip) = &ev.ip {
        env.push(("CLIENT_IP", ip.clone()));
    }
    if let Some(a) = &ev.agent {
        env.push(("CLIENT_USERAGENT", a.clone()));
    }
    for (name, v) in [
        "MOUNT_NAME",
        "MOUNT_DESCRIPTION",
        "MOUNT_URL",
        "MOUNT_GENRE",
    ]
    .into_iter()
    .zip(&ev.stream)
    {
        if let Some(v) = v {
            env.push((name, v.clone()));
        }
    }
    env
}

/// The POST body of a `url` hook: Icecast 2.5's legacy fields, in its order.
pub fn form(hook: &HookConfig, ev: &Event, server: &ServerInfo) -> String {
    let action = hook.action.as_deref().unwrap_or(ev.trigger);
    let fields = [
        ("action", action.to_owned()),
        ("mount", escape(&ev.mount)),
        ("client", ev.client_id.to_string()),
        ("role", escape(ev.role)),
        ("username", escape(&ev.username)),
        ("ip", escape(ev.ip.as_deref().unwrap_or(""))),
        ("agent", escape(ev.agent.as_deref().unwrap_or("-"))),
        ("duration", ev.duration.to_string()),
        ("admin", "0".to_owned()),
        ("server", escape(&server.hostname)),
        ("port", server.port.to_string()),
    ];
    fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event {
            trigger: "source-connect",
            mount: "/live.mp3".into(),
            client_id: 7,
            connected_at: 1_700_000_000,
            duration: 3,
            role: "source",
            username: "source".into(),
            ip: Some("127.0.0.1".into()),
            agent: Some("Liquidsoap/2.1".into()),
            media_type: "audio/mpeg".into(),
            stream: [Some("Live".into()), None, None, Some("Jazz".into())],
            public: false,
            hidden: false,
            title: String::new(),
        }
    }

    fn hook(args: Option<&str>) -> HookConfig {
        HookConfig {
            trigger: "source-connect".into(),
            exec: Some("/bin/on-air".into()),
            default_arguments: args.map(Into::into),
            arguments: vec!["--x".into()],
            ..HookConfig::default()
        }
    }

    #[test]
    fn argv_as_icecast_2_5_modes() {
        let exe = Path::new("/bin/on-air");
        let e = event();
        assert_eq!(
            argv(&hook(None), exe, &e),
            ["/bin/on-air", "/live.mp3", "--x"]
        );
        assert_eq!(
            argv(&hook(Some("uri_and_trigger")), exe, &e),
            ["/bin/on-air", "/live.mp3", "source-connect", "--x"]
        );
        assert_eq!(
            argv(&hook(Some("no_defaults")), exe, &e),
            ["/bin/on-air", "--x"]
        );
    }

    #[test]
    fn environment_and_form_carry_icecasts_names() {
        let s = ServerInfo {
            hostname: "radio.example.org".into(),
            admin: "ops@example.org".into(),
            logdir: "/var/log/throng".into(),
            port: 8000,
        };
        let env = environment(&event(), &s);
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("EVENT_TRIGGER"), Some("source-connect"));
        assert_eq!(get("SOURCE_ACTION"), Some("source-connect"));
        assert_eq!(get("SOURCE_MOUNTPOINT"), Some("/live.mp3"));
        assert_eq!(get("CLIENT_IP"), Some("127.0.0.1"));
        assert_eq!(get("MOUNT_NAME"), Some("Live"));
        assert_eq!(get("MOUNT_URL"), None);
        let url = HookConfig {
            exec: None,
            url: Some("http://127.0.0.1/hook".into()),
            action: Some("mount_add".into()),
            ..hook(None)
        };
        assert_eq!(
            form(&url, &event(), &s),
            "action=mount_add&mount=%2flive%2emp3&client=7&role=source&username=source&\
             ip=127%2e0%2e0%2e1&agent=Liquidsoap%2f2%2e1&duration=3&admin=0&\
             server=radio%2eexample%2eorg&port=8000"
        );
    }
}
