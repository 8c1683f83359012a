//! Configuration reload on a running server (SIGHUP, admin `reloadconfig`): re-read the
//! configuration from the [`ConfigSource`] the server started from (file, command-line
//! overrides, stored passwords), check it as a start would, then apply it without dropping
//! anyone, or refuse it and keep the running one.
//!
//! Applied live: the configuration every request reads ([`ServerCtx::config`]: passwords,
//! per-mount settings, headers, limits, timeouts, status fields), the authenticators (rebuilt;
//! an unchanged one is kept with its state), the filters, fallback rules, the `clients` limit,
//! the [`Tuning`](crate::mount::live::Tuning) of live mounts (max-listeners, hidden,
//! burst-size for new listeners) and their stream description (the `[[mount]]` overrides
//! `stream-name`, `stream-description`, `stream-url`, `genre`, `bitrate`, `public` re-applied
//! to what the source announced, as Icecast 2.4.4 `source_update_settings`; new listeners get
//! the new `icy-*` headers), intros (re-read), `[[relay]]` and `[master]` (only what
//! changed restarts), file mounts, and the log level (through the binary's hook). Not applied
//! (a restart is needed, as with nginx): listen addresses and the SHOUTcast port (the sockets
//! are kept), shard threads (`workers`, `write-interval-ms`, `lag-policy`), the log files, the
//! demo, the HTTPS sockets (`tls.listen`, `tls.auto`; their certificates are reloaded). A live
//! source keeps the queue size it started with.

use std::sync::Arc;
use std::time::Duration;

use crate::config::source::ConfigSource;
use crate::config::{Config, Logging};
use crate::ctx::ServerCtx;
use crate::ingest::file::FileMounts;
use crate::ingest::relay::Relays;
use crate::net::clients::limit_for;
use crate::net::filters::Filters;

/// Applies a new `[logging]` section to the process's diagnostics (the binary owns the
/// subscriber); `Err` says why it could not (a bad filter).
pub type LogHook = Box<dyn Fn(&Logging) -> Result<(), String> + Send + Sync>;

/// What a running server needs to reload: where its configuration comes from, and the feeds
/// started from it (relays, file mounts).
pub struct Reloader {
    /// Where the configuration comes from; `None` for a server built from a [`Config`] alone
    /// (then a reload is refused).
    pub(crate) source: Option<ConfigSource>,
    /// The running relays and master poller.
    pub(crate) relays: Relays,
    /// The running file mounts.
    pub(crate) files: FileMounts,
    /// Applies `[logging] level`, when the binary gave one.
    pub(crate) log_hook: Option<LogHook>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("source", &self.source)
            .field("relays", &self.relays)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// Keys a reload cannot apply: the running value stays until a restart.
const NEEDS_RESTART: [&str; 15] = [
    "listen",
    "tls.listen",
    "tls.auto",
    "shoutcast-mount",
    "workers",
    "limits.write-interval-ms",
    "limits.lag-policy",
    "logging.access-log",
    "logging.error-log",
    "logging.logsize",
    "logging.logarchive",
    "paths.pidfile",
    "demo",
    "demo-mount",
    // The WebRTC engines' sockets and their transcoders' settings are made at start.
    "webrtc",
];

/// Re-reads the configuration and applies it; `Ok` carries a summary of what changed, `Err`
/// why the new configuration was refused (the running one is kept). Logs either outcome.
pub async fn reload(ctx: &Arc<ServerCtx>, r: &mut Reloader) -> Result<String, String> {
    let Some(source) = r.source.as_mut() else {
        let why = "this server was started without a configuration source".to_owned();
        tracing::error!("configuration reload refused: {why}");
        return Err(why);
    };
    let file = source.file.to_string();
    let loaded = match source.load() {
        Ok(l) => l,
        Err(e) => {
            let why = format!("{file}: {}", e.one_line());
            tracing::error!(
                "configuration reload refused, the running configuration is kept: {why}"
            );
            return Err(why);
        }
    };
    // Once per change of the file: an unchanged file's warnings were logged before.
    if !loaded.warnings_repeated {
        for w in &loaded.warnings {
            tracing::warn!("{w}");
        }
    }
    let old = ctx.config();
    let new = Arc::new(loaded.config);
    let auth = match ctx.auth().rebuild(new.clone(), ctx.port) {
        Ok(a) => a,
        Err(e) => {
            let why = format!("{file}: {e}");
            tracing::error!(
                "configuration reload refused, the running configuration is kept: {why}"
            );
            return Err(why);
        }
    };
    let (mut applied, kept) = changed_keys(&old, &new);
    // Install: from here on every new request sees the new configuration.
    ctx.config.store(new.clone());
    ctx.auth.store(Arc::new(auth));
    if old.paths != new.paths {
        ctx.filters.store(Arc::new(Filters::new(&new.paths)));
    }
    ctx.registry.set_config(new.clone());
    // Certificates are loaded again even when the configuration names the same files (a
    // renewal rewrites them): new handshakes get them, established connections keep theirs.
    if new.tls.enabled() {
        match ctx.tls.reload(&new.tls) {
            Ok(()) => {
                tracing::info!("TLS certificates reloaded");
                applied.push("TLS certificates reloaded".into());
            }
            Err(e) => {
                tracing::error!("TLS certificates not reloaded, the previous ones are kept: {e}");
                applied.push(format!("TLS certificates not reloaded: {e}"));
            }
        }
    }
    ctx.clients.set_max(limit_for(new.limits.clients));
    // Recordings start new files (their names expanded again), as Icecast reopens dump files.
    ctx.new_dump_files
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ctx.intros.clear();
    let retuned = ctx
        .registry
        .list()
        .iter()
        .filter(|m| m.retune(&new))
        .count();
    if retuned > 0 {
        applied.push(format!("{retuned} live mount(s) retuned"));
    }
    applied.extend(r.relays.apply(ctx, &new).await);
    match r.files.apply(ctx, &new).await {
        Ok(changes) => applied.extend(changes),
        Err((changes, e)) => {
            applied.extend(changes);
            applied.push(format!("a file mount failed to start: {e}"));
        }
    }
    if old.logging.level != new.logging.level {
        match &r.log_hook {
            Some(hook) => {
                if let Err(e) = hook(&new.logging) {
                    tracing::warn!("logging.level not applied: {e}");
                    applied.push(format!("logging.level not applied: {e}"));
                }
            }
            None => applied.push("logging.level not applied (no log hook)".into()),
        }
    }
    for k in &kept {
        tracing::warn!(
            "configuration reload: {k} changed but needs a restart; the running value is kept"
        );
    }
    let mut summary = if applied.is_empty() && kept.is_empty() {
        "configuration reloaded: no change".to_owned()
    } else if applied.is_empty() {
        "configuration reloaded: nothing applied".to_owned()
    } else {
        format!("configuration reloaded: {}", applied.join("; "))
    };
    if !kept.is_empty() {
        summary.push_str(&format!(
            "; not applied until a restart: {}",
            kept.join(", ")
        ));
    }
    // At warn level, so a reload is confirmed in the log even at Icecast's `<loglevel>2`
    // (AzuraCast's), which hides info.
    tracing::warn!("{summary} ({file})");
    Ok(summary)
}

/// Stops the feeds started from the configuration at shutdown, waiting at most `limit`.
pub async fn stop_feeds(r: Reloader, limit: Duration) {
    r.relays.stop_all(limit).await;
}

/// The keys that differ between `old` and `new`, as TOML names them, split into those applied
/// live (`[[relay]]` left out: the relay set reports its own changes) and those that need a
/// restart ([`NEEDS_RESTART`]). Values are never shown (they may be passwords). `[[mount]]`
/// entries are told apart by name: `mount[/a] added`, `mount[/b] removed`,
/// `mount[/c].max-listeners`.
pub fn changed_keys(old: &Config, new: &Config) -> (Vec<String>, Vec<String>) {
    let (Ok(a), Ok(b)) = (toml::Value::try_from(old), toml::Value::try_from(new)) else {
        return (vec!["configuration changed".into()], Vec::new());
    };
    let mut keys = Vec::new();
    diff(&a, &b, "", &mut keys);
    let (kept, applied) = keys.into_iter().partition(|k: &String| {
        NEEDS_RESTART
            .iter()
            .any(|r| k == r || k.starts_with(&format!("{r}.")))
    });
    (applied, kept)
}

fn diff(a: &toml::Value, b: &toml::Value, at: &str, out: &mut Vec<String>) {
    use toml::Value;
    let key = |k: &str| {
        if at.is_empty() {
            k.to_owned()
        } else {
            format!("{at}.{k}")
        }
    };
    match (a, b) {
        (Value::Table(x), Value::Table(y)) => {
            let mut names: Vec<&String> = x.keys().chain(y.keys()).collect();
            names.sort();
            names.dedup();
            for n in names {
                match (x.get(n), y.get(n)) {
                    (Some(_), Some(_)) if n == "relay" && at.is_empty() => {}
                    (Some(va), Some(vb)) if n == "mount" && at.is_empty() => mounts(va, vb, out),
                    (Some(va), Some(vb)) => diff(va, vb, &key(n), out),
                    (None, Some(_)) | (Some(_), None) if n == "relay" && at.is_empty() => {}
                    (None, Some(v)) if n == "mount" && at.is_empty() => {
                        mounts(&Value::Array(Vec::new()), v, out)
                    }
                    (Some(v), None) if n == "mount" && at.is_empty() => {
                        mounts(v, &Value::Array(Vec::new()), out)
                    }
                    (None, Some(_)) | (Some(_), None) => out.push(key(n)),
                    (None, None) => {}
                }
            }
        }
        (a, b) if a != b => out.push(at.to_owned()),
        _ => {}
    }
}

fn mounts(a: &toml::Value, b: &toml::Value, out: &mut Vec<String>) {
    let by_name = |v: &toml::Value| -> Vec<(String, toml::Value)> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        let name = m.get("name").and_then(|n| n.as_str()).unwrap_or("");
                        (name.to_owned(), m.clone())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (x, y) = (by_name(a), by_name(b));
    for (name, m) in &x {
        match y.iter().find(|(n, _)| n == name) {
            None => out.push(format!("mount[{name}] removed")),
            Some((_, n)) => diff(m, n, &format!("mount[{name}]"), out),
        }
    }
    for (name, _) in &y {
        if !x.iter().any(|(n, _)| n == name) {
            out.push(format!("mount[{name}] added"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_named_by_key_and_restart_keys_are_apart() {
        let old = Config::from_toml(
            "listen = [\"127.0.0.1:8000\"]\n[authentication]\nsource-password = \"a\"\n\
             [[mount]]\nname = \"/a\"\nmax-listeners = 1\n[[mount]]\nname = \"/b\"\n\
             [[relay]]\nserver = \"x\"\nmount = \"/r\"\n",
        )
        .unwrap();
        let new = Config::from_toml(
            "listen = [\"127.0.0.1:8001\"]\n[authentication]\nsource-password = \"b\"\n\
             [[mount]]\nname = \"/a\"\nmax-listeners = 2\n[[mount]]\nname = \"/c\"\n",
        )
        .unwrap();
        let (applied, kept) = changed_keys(&old, &new);
        assert_eq!(
            applied,
            [
                "authentication.source-password",
                "mount[/a].max-listeners",
                "mount[/b] removed",
                "mount[/c] added"
            ]
        );
        assert_eq!(kept, ["listen"]);
        assert_eq!(changed_keys(&old, &old), (vec![], vec![]));
    }
}
