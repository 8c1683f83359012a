//! Status documents: `/status-json.xsl` shaped exactly as Icecast 2.4.4's (xml2json over the
//! stats XML: alphabetical keys, numeric strings as numbers, `source` absent for no mount, an
//! object for one and an array for several, `"dummy":null` closing each source where Icecast's
//! last element is hidden), and `/api/v1/status` with the same data in a consistent shape
//! (`mounts` always an array). Hidden mounts are left out of both.

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use crate::ctx::ServerCtx;
use crate::mount::live::Mount;

/// Icecast's date format, e.g. `Sun, 10 Jan 2021 21:08:37 +0100`.
pub(crate) fn rfc822(t: &chrono::DateTime<chrono::Local>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S %z").to_string()
}

/// Icecast's ISO 8601 format, e.g. `2021-01-10T21:08:37+0100`.
pub(crate) fn iso8601(t: &chrono::DateTime<chrono::Local>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%z").to_string()
}

/// A stat value as xml2json renders it: numbers for numeric text, else a string.
pub(crate) fn stat(text: &str) -> Value {
    if let Ok(n) = text.parse::<i64>() {
        return json!(n);
    }
    if let Ok(f) = text.parse::<f64>() {
        if f.is_finite() && text.contains('.') {
            return json!(f);
        }
    }
    json!(text)
}

fn public_mounts(ctx: &ServerCtx) -> Vec<std::sync::Arc<Mount>> {
    ctx.registry
        .list()
        .into_iter()
        .filter(|m| !m.hidden())
        .collect()
}

/// The sample rate and channels of a mount: from `ice-audio-info`, else from the frames.
pub(crate) fn audio_params(m: &Mount) -> (Option<String>, Option<String>) {
    let description = m.description();
    let info = &description.info;
    let p = m.params();
    let rate = info
        .audio_info_value("samplerate")
        .or_else(|| info.audio_info_value("ice-samplerate"))
        .map(str::to_owned)
        .or_else(|| (p.sample_rate > 0).then(|| p.sample_rate.to_string()));
    let channels = info
        .audio_info_value("channels")
        .or_else(|| info.audio_info_value("ice-channels"))
        .map(str::to_owned)
        .or_else(|| (p.channels > 0).then(|| p.channels.to_string()));
    (rate, channels)
}

/// The bitrate every status document shows for a mount, in kbit/s as text: the source's
/// declared one (`ice-bitrate`, `icy-br`, `ice-audio-info`), else the one its MP3 frames carry
/// (so `/admin/stats`, `status-json.xsl` and `/api/v1/status` agree).
pub(crate) fn bitrate(m: &Mount) -> Option<String> {
    m.settings
        .info
        .bitrate
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            let p = m.params().bitrate_kbps;
            (p > 0).then(|| p.to_string())
        })
}

/// The `subtype` stat of an Ogg mount: its codec (`Vorbis`, `Opus`, `FLAC`...), as Icecast
/// 2.4.4 `format_ogg.c` names the codecs of the stream; `None` for other formats or before the
/// codec headers have come.
pub(crate) fn subtype(m: &Mount) -> Option<&'static str> {
    let codec = m.params().codec;
    (m.settings.format == throng_proto::format::Format::Ogg && !codec.is_empty()).then_some(codec)
}

fn icecast_source(ctx: &ServerCtx, m: &Mount) -> Value {
    let description = m.description();
    let info = &description.info;
    let (rate, channels) = audio_params(m);
    let mut o = Map::new();
    // Ogg: the ARTIST comment or admin `artist` (Icecast 2.4.4 `format_ogg.c:update_comments`).
    if let Some(a) = m.ogg_tags.artist() {
        o.insert("artist".into(), stat(&a));
    }
    if let Some(a) = &info.audio_info_raw {
        o.insert("audio_info".into(), json!(a));
    }
    if let Some(b) = bitrate(m) {
        o.insert("bitrate".into(), stat(&b));
    }
    if let Some(c) = channels {
        o.insert("channels".into(), stat(&c));
    }
    o.insert("genre".into(), stat(&info.genre));
    o.insert(
        "listener_peak".into(),
        json!(m.listener_peak.load(Ordering::Relaxed)),
    );
    o.insert(
        "listeners".into(),
        json!(m.listeners.load(Ordering::Relaxed)),
    );
    o.insert(
        "listenurl".into(),
        json!(m.listen_url(&ctx.config().hostname, ctx.port)),
    );
    if let Some(r) = rate {
        o.insert("samplerate".into(), stat(&r));
    }
    if let Some(u) = crate::hls_http::hls_url(ctx, m) {
        o.insert("hls_url".into(), json!(u));
    }
    o.insert("server_description".into(), stat(&info.description));
    o.insert("server_name".into(), stat(&info.name));
    o.insert("server_type".into(), json!(m.settings.content_type));
    if let Some(u) = &info.url {
        o.insert("server_url".into(), json!(u));
    }
    o.insert("stream_start".into(), json!(rfc822(&m.started)));
    if let Some(t) = subtype(m) {
        o.insert("subtype".into(), json!(t));
    }
    o.insert("stream_start_iso8601".into(), json!(iso8601(&m.started)));
    let title = m.title();
    if !title.is_empty() {
        o.insert("title".into(), stat(&title));
    }
    // Icecast's last per-source stat (`user_agent`) is hidden, so xml2json closes with this.
    o.insert("dummy".into(), Value::Null);
    Value::Object(o)
}

/// `/status-json.xsl`, as Icecast 2.4.4.
pub fn icecast_status(ctx: &ServerCtx) -> Value {
    let mut s = Map::new();
    s.insert("admin".into(), json!(ctx.config().admin_email));
    s.insert("host".into(), json!(ctx.config().hostname));
    s.insert("location".into(), json!(ctx.config().location));
    s.insert("server_id".into(), json!(ctx.config().server_id));
    s.insert("server_start".into(), json!(rfc822(&ctx.started)));
    s.insert("server_start_iso8601".into(), json!(iso8601(&ctx.started)));
    let sources: Vec<Value> = public_mounts(ctx)
        .iter()
        .map(|m| icecast_source(ctx, m))
        .collect();
    match sources.len() {
        0 => {}
        1 => {
            s.insert("source".into(), sources.into_iter().next().expect("one"));
        }
        _ => {
            s.insert("source".into(), Value::Array(sources));
        }
    }
    json!({ "icestats": Value::Object(s) })
}

/// `/api/v1/status`: the same facts, consistently shaped and typed.
pub fn v1_status(ctx: &ServerCtx) -> Value {
    let mounts: Vec<Value> = public_mounts(ctx)
        .iter()
        .map(|m| v1_mount(ctx, m))
        .collect();
    let counts = crate::roster::counts(ctx);
    // `{"icy": {"client:hung-up": 3, ...}, "hls": {...}, ...}`: the end-reason vocabulary
    // of the access log and `throng_session_ends_total`.
    let mut session_ends = serde_json::Map::new();
    for (path, why, n) in crate::roster::session_ends(ctx) {
        let by_reason = session_ends
            .entry(path.as_str())
            .or_insert_with(|| json!({}));
        by_reason[why.key()] = json!(n);
    }
    json!({
        "server": {
            "id": ctx.config().server_id,
            "version": env!("CARGO_PKG_VERSION"),
            "host": ctx.config().hostname,
            "location": ctx.config().location,
            "admin": ctx.config().admin_email,
            "started_iso8601": iso8601(&ctx.started),
            "uptime_s": (chrono::Local::now() - ctx.started).num_seconds(),
            "listeners": counts.total(),
            "listeners_by_path": {
                "icy": counts.icy,
                "hls": counts.hls,
                "whep": counts.whep,
            },
            "session_ends": session_ends,
            "clients": ctx.clients.open(),
            "sources": ctx.registry.list().len(),
        },
        "station": {
            "name": ctx.config().station.name,
            "description": ctx.config().station.description,
            "logo": ctx.config().station.logo,
            "url": ctx.config().station.url,
        },
        "mounts": mounts,
    })
}

/// One mount as `/api/v1/status` (and the admin JSON API) shows it.
pub fn v1_mount(ctx: &ServerCtx, m: &Mount) -> Value {
    let description = m.description();
    let info = &description.info;
    let (rate, channels) = audio_params(m);
    json!({
        "mount": m.name,
        "listenurl": m.listen_url(&ctx.config().hostname, ctx.port),
        "whep_url": crate::whep::whep_url(ctx, m),
        "content_type": m.settings.content_type,
        "format": format!("{:?}", m.settings.format).to_lowercase(),
        "source": match m.settings.kind {
            crate::mount::live::SourceKind::Client => "client",
            crate::mount::live::SourceKind::File => "file",
            crate::mount::live::SourceKind::Relay => "relay",
        },
        "name": info.name,
        "description": info.description,
        "genre": info.genre,
        "url": info.url,
        "bitrate_kbps": bitrate(m).and_then(|b| b.parse::<u32>().ok()),
        "subtype": subtype(m),
        "samplerate_hz": rate.and_then(|r| r.parse::<u32>().ok()),
        "channels": channels.and_then(|c| c.parse::<u32>().ok()),
        "public": info.public,
        "title": m.title(),
        "artist": m.ogg_tags.artist(),
        "listeners": m.listeners.load(Ordering::Relaxed),
        "listener_peak": m.listener_peak.load(Ordering::Relaxed),
        "max_listeners": m.max_listeners(),
        "slow_listeners": m.slow_listeners.load(Ordering::Relaxed),
        "source_bytes_received": m.source_bytes.load(Ordering::Relaxed),
        "bytes_sent": m.bytes_sent.load(Ordering::Relaxed),
        "stream_start_iso8601": iso8601(&m.started),
        "stream_start_unix": m.started.timestamp(),
        "hls_url": crate::hls_http::hls_url(ctx, m),
        "hls_unavailable": crate::hls_http::hls_unavailable(ctx, m),
        "artwork": m.history.artwork(),
        // Where its listeners go when its source stops (the station page keeps its card).
        "fallback": ctx.registry.fallback_of(&m.name),
        "history": history(m),
    })
}

/// The `history` of a mount in `/api/v1/status`: its last titles, newest first, each
/// `{"title", "at_unix", "artwork"}` (`artwork` null unless the update gave an image URL).
fn history(m: &Mount) -> Value {
    m.history
        .newest_first()
        .into_iter()
        .map(|p| json!({ "title": p.title, "at_unix": p.at_unix, "artwork": p.artwork }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_text_becomes_numbers() {
        assert_eq!(stat("128"), json!(128));
        assert_eq!(stat("1.5"), json!(1.5));
        assert_eq!(stat("Rock"), json!("Rock"));
        assert_eq!(stat("-"), json!("-"));
        assert_eq!(stat("inf"), json!("inf"));
    }

    #[test]
    fn dates_in_icecast_formats() {
        use chrono::TimeZone;
        let t = chrono::Local
            .with_ymd_and_hms(2021, 1, 10, 21, 8, 37)
            .unwrap();
        let z = t.format("%z").to_string();
        assert_eq!(rfc822(&t), format!("Sun, 10 Jan 2021 21:08:37 {z}"));
        assert_eq!(iso8601(&t), format!("2021-01-10T21:08:37{z}"));
    }
}
