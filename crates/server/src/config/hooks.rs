//! Event hooks (`[[hook]]` for every mount, `[[mount.hook]]` for one): a program run, or a URL
//! called, when something happens on a mount, as Icecast 2.5's `<event-bindings>` (`exec` and
//! `url` events) and Icecast-KH's `<on-connect>`/`<on-disconnect>` scripts. The triggers are
//! Icecast 2.5's names: `source-connect`, `source-disconnect`, `format-metadata-changed` (the
//! title changed), `source-listener-attach` (a listener let in), and Throng's
//! `source-listener-detach` (a listener gone; Icecast 2.5 has no such event). What runs and
//! with what is `hooks/` (layer 4). `[hooks]` bounds them all ([`HookLimits`]): so many run
//! at once, so many wait, the rest are dropped and counted (issue 42).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The triggers a hook can name (Icecast 2.5 event names).
pub const TRIGGERS: [&str; 5] = [
    "source-connect",
    "source-disconnect",
    "format-metadata-changed",
    "source-listener-attach",
    "source-listener-detach",
];

/// The argument lists of an `exec` hook (Icecast 2.5 `default_arguments`).
pub const ARGUMENT_MODES: [&str; 4] = ["legacy", "no_defaults", "uri", "uri_and_trigger"];

/// Default of `[hooks] max-concurrent`.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// Default of `[hooks] queue`.
pub const DEFAULT_QUEUE: usize = 1000;

/// `[hooks]`: the bounds of every hook of the server (`[[hook]]` and `[[mount.hook]]` alike,
/// `exec` and `url` alike). Not in Icecast, whose hooks run without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct HookLimits {
    /// Most hooks running at once, hook programs (`exec`) and hook requests (`url`) together,
    /// in hooks. Default [`DEFAULT_MAX_CONCURRENT`] (16); 0 is read as 1. A reload applies it
    /// to the next hooks (a lower value as running hooks end).
    pub max_concurrent: usize,
    /// Most hooks waiting for one of `max-concurrent` to end, in hooks; they start in the
    /// order of their events. A hook beyond it is dropped (not run), logged at WARN (at most
    /// once a second, with the count) and counted in `/metrics` as `throng_hooks_dropped_total`.
    /// Default [`DEFAULT_QUEUE`] (1000); 0 drops every hook that cannot start at once.
    pub queue: usize,
}

impl Default for HookLimits {
    fn default() -> Self {
        HookLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            queue: DEFAULT_QUEUE,
        }
    }
}

impl HookLimits {
    /// True when both keys have their defaults (the section is then left out of a written
    /// configuration).
    pub fn is_default(&self) -> bool {
        *self == HookLimits::default()
    }
}

/// One hook: exactly one of `exec` and `url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct HookConfig {
    /// When it runs: one of [`TRIGGERS`].
    pub trigger: String,
    /// A program to run (Icecast 2.5 `<event type="exec">` `executable`), with Icecast's
    /// arguments and environment; standard streams on `/dev/null`.
    pub exec: Option<PathBuf>,
    /// The arguments before `arguments` (Icecast 2.5 `default_arguments`): `legacy` (the
    /// default, as KH's scripts: the mount), `uri` (the mount), `uri_and_trigger` (the mount
    /// and the trigger) or `no_defaults`.
    pub default_arguments: Option<String>,
    /// Extra arguments after the default ones (Icecast 2.5 `<option type="argument">`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    /// A URL to POST Icecast 2.5's legacy form fields to (`<event type="url">`).
    pub url: Option<String>,
    /// The `action` field of the POST (default: the trigger), e.g. `mount_add`.
    pub action: Option<String>,
    /// HTTP Basic user for `url`.
    pub username: Option<String>,
    /// HTTP Basic password for `url`.
    pub password: Option<String>,
    /// Seconds the program or the call may take before it is killed or dropped (default 10).
    pub timeout: Option<u64>,
}

impl HookConfig {
    /// Checks the trigger, the argument mode, the URL, and that exactly one of `exec` and
    /// `url` is set; `Err` names the problem (`where_` says which hook).
    pub fn check(&self, where_: &str) -> Result<(), String> {
        if !TRIGGERS.contains(&self.trigger.as_str()) {
            return Err(format!(
                "{where_}: trigger {:?} is not one of {}",
                self.trigger,
                TRIGGERS.join(", ")
            ));
        }
        if let Some(m) = &self.default_arguments {
            if !ARGUMENT_MODES.contains(&m.as_str()) {
                return Err(format!(
                    "{where_}: default-arguments {m:?} is not one of {}",
                    ARGUMENT_MODES.join(", ")
                ));
            }
        }
        match (&self.exec, &self.url) {
            (Some(_), None) => Ok(()),
            (None, Some(u)) => throng_proto::url_auth::CallbackUrl::parse(u)
                .map(|_| ())
                .map_err(|e| format!("{where_}: url: {e}")),
            _ => Err(format!("{where_}: set exactly one of `exec` and `url`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_needs_a_known_trigger_and_one_action() {
        let ok = HookConfig {
            trigger: "source-connect".into(),
            exec: Some("/bin/true".into()),
            ..HookConfig::default()
        };
        assert!(ok.check("hook").is_ok());
        let both = HookConfig {
            url: Some("http://127.0.0.1/x".into()),
            ..ok.clone()
        };
        assert!(both.check("hook").is_err());
        let bad = HookConfig {
            trigger: "listener-remove".into(),
            ..ok.clone()
        };
        assert!(bad.check("hook").unwrap_err().contains("trigger"));
        let bad_url = HookConfig {
            exec: None,
            url: Some("ftp://x".into()),
            ..ok
        };
        assert!(bad_url.check("hook").is_err());
    }
}
