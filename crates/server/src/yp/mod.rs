//! YP directory listing (`[[directory]]`, Icecast `<directory>`): each public live mount (a
//! source that sent `ice-public: 1`, or a `[[mount]] public = true`) is added to every
//! directory, touched with its current title and listeners, and removed when it ends or the
//! server stops, with Icecast's protocol (`protocol.rs`) and its timing (`yp.c`): the first
//! touch 5 s after the add, then every `TouchFreq` the directory asked for (else
//! `touch-interval`, at least 30 s); a refused add is retried after 2 hours, a refused touch
//! adds again after 20 minutes, an unreachable directory is tried again after 20 minutes.
//!
//! One task per server does it all, off every listener and source path, one request at a
//! time, each bounded by `yp-url-timeout`.

pub mod protocol;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_proto::url_auth::CallbackUrl;

use crate::config::directory::DirectoryConfig;
use crate::config::Config;
use crate::ctx::ServerCtx;
use crate::mount::live::Mount;
use protocol::Listing;

/// How often the task looks for work.
pub const TICK: Duration = Duration::from_secs(1);

/// Wait after a refused add (Icecast: 7200 s).
const ADD_REFUSED: Duration = Duration::from_secs(7200);
/// Wait after a failed touch or an unreachable directory (Icecast: 1200 s).
const RETRY: Duration = Duration::from_secs(1200);
/// The first touch after an add (Icecast: 5 s).
const FIRST_TOUCH: Duration = Duration::from_secs(5);

/// One mount in one directory.
struct Entry {
    mount: Arc<Mount>,
    sid: Option<String>,
    next: Instant,
    interval: Duration,
}

/// Starts the YP task of `ctx`'s server.
pub fn start(ctx: Arc<ServerCtx>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TICK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = ctx.shutdown.clone();
        let mut entries: HashMap<(String, u64), Entry> = HashMap::new();
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => {}
            }
            let config = ctx.config();
            if *shutdown.borrow() {
                for ((url, _), e) in entries.drain() {
                    remove(&config, &url, e).await;
                }
                break;
            }
            step(&ctx, &config, &mut entries).await;
        }
    });
}

/// One pass: new public mounts added, due ones touched, ended ones removed.
async fn step(ctx: &ServerCtx, config: &Arc<Config>, entries: &mut HashMap<(String, u64), Entry>) {
    if config.directory.is_empty() && entries.is_empty() {
        return;
    }
    let live: Vec<Arc<Mount>> = ctx
        .registry
        .list()
        .into_iter()
        .filter(|m| m.description().info.public && !m.settings.force_hidden)
        .collect();
    let now = Instant::now();
    for d in &config.directory {
        for m in &live {
            entries
                .entry((d.yp_url.clone(), m.id))
                .or_insert_with(|| Entry {
                    mount: m.clone(),
                    sid: None,
                    next: now,
                    interval: Duration::from_secs(d.touch_interval.max(30)),
                });
        }
    }
    let gone: Vec<(String, u64)> = entries
        .keys()
        .filter(|(url, id)| {
            !live.iter().any(|m| m.id == *id) || !config.directory.iter().any(|d| &d.yp_url == url)
        })
        .cloned()
        .collect();
    for key in gone {
        if let Some(e) = entries.remove(&key) {
            remove(config, &key.0, e).await;
        }
    }
    for ((url, _), e) in entries.iter_mut() {
        if e.next > now {
            continue;
        }
        let Some(dir) = config.directory.iter().find(|d| &d.yp_url == url) else {
            continue;
        };
        let listing = listing(ctx, config, &e.mount);
        match e.sid.clone() {
            None => {
                let reply = send(config, dir, protocol::add_body(&listing)).await;
                match reply {
                    Some(r) if r.ok && r.sid.is_some() => {
                        tracing::info!(mount = %e.mount.name, directory = %url, "listed in the YP directory");
                        e.sid = r.sid;
                        if let Some(f) = r.touch_freq {
                            e.interval = Duration::from_secs(f);
                        }
                        e.next = now + FIRST_TOUCH;
                    }
                    Some(r) => {
                        tracing::warn!(
                            mount = %e.mount.name,
                            directory = %url,
                            "YP add refused: {}",
                            r.message.as_deref().unwrap_or("no response from server")
                        );
                        e.next = now + ADD_REFUSED;
                    }
                    None => e.next = now + RETRY,
                }
            }
            Some(sid) => {
                let m = &e.mount;
                let max = m
                    .max_listeners()
                    .unwrap_or(u32::try_from(config.limits.clients).unwrap_or(u32::MAX));
                let listeners = m.listeners.load(std::sync::atomic::Ordering::Relaxed);
                let body = protocol::touch_body(&sid, &listing, &m.title(), listeners, max);
                match send(config, dir, body).await {
                    Some(r) if r.ok => {
                        if let Some(f) = r.touch_freq {
                            e.interval = Duration::from_secs(f);
                        }
                        e.next = now + e.interval;
                    }
                    other => {
                        tracing::info!(
                            mount = %m.name,
                            directory = %url,
                            "YP touch failed: {}",
                            other
                                .and_then(|r| r.message)
                                .unwrap_or_else(|| "no response from server".into())
                        );
                        e.sid = None;
                        e.next = now + RETRY.max(e.interval);
                    }
                }
            }
        }
    }
}

/// Removes a listed entry (nothing to do without a session).
async fn remove(config: &Config, url: &str, e: Entry) {
    let Some(sid) = e.sid else { return };
    let dir = config
        .directory
        .iter()
        .find(|d| d.yp_url == url)
        .cloned()
        .unwrap_or_else(|| DirectoryConfig {
            yp_url: url.to_owned(),
            ..DirectoryConfig::default()
        });
    tracing::info!(mount = %e.mount.name, directory = %url, "clearing up the YP entry");
    send(config, &dir, protocol::remove_body(&sid)).await;
}

/// POSTs `body` to `dir`; the reply, or `None` (logged) when it could not be had.
async fn send(config: &Config, dir: &DirectoryConfig, body: String) -> Option<protocol::Reply> {
    let url = CallbackUrl::parse(&dir.yp_url).ok()?;
    let timeout = Duration::from_secs(dir.yp_url_timeout.max(1));
    match crate::auth::http_client::post_form(&url, None, &config.server_id, body, timeout).await {
        Ok(reply) => Some(protocol::read_reply(&reply.headers)),
        Err(e) => {
            tracing::warn!(directory = %dir.yp_url, "YP directory unreachable: {e}");
            None
        }
    }
}

/// What the directory is told about `m`.
fn listing(ctx: &ServerCtx, config: &Config, m: &Mount) -> Listing {
    let description = m.description();
    let info = &description.info;
    let audio = |k: &str| {
        info.audio_info_value(k)
            .or_else(|| info.audio_info_value(&format!("ice-{k}")))
            .unwrap_or_default()
            .to_owned()
    };
    let ct = m.settings.content_type.as_str();
    let subtype = match ct {
        "audio/mpeg" | "audio/mp3" => "MP3",
        "audio/aac" | "audio/aacp" | "audio/x-aac" => "AAC",
        t if t.contains("ogg") || t.contains("opus") => "Vorbis",
        _ => "",
    };
    Listing {
        admin: config.admin_email.clone(),
        name: info.name.clone(),
        genre: info.genre.clone(),
        cluster_password: config
            .mount_for(&m.name)
            .and_then(|c| c.cluster_password.clone())
            .unwrap_or_default(),
        description: info.description.clone(),
        url: info.url.clone().unwrap_or_default(),
        listen_url: m.listen_url(&config.hostname, ctx.port),
        content_type: ct.to_owned(),
        subtype: subtype.to_owned(),
        bitrate: info.bitrate.clone().unwrap_or_else(|| audio("bitrate")),
        samplerate: audio("samplerate"),
        channels: audio("channels"),
        audio_info: info.audio_info_raw.clone().unwrap_or_default(),
        instance: m.id.to_string(),
    }
}
