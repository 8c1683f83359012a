//! The playlists Icecast 2.4.4 generates on the fly for a path naming no mount (`fserve.c:
//! fserve_client_create`): `/<mount>.m3u` is `audio/x-mpegurl` holding
//! `http://<Host header><mount>` (the configured `hostname:port` when the request has no
//! `Host`), served whether or not the mount exists or is hidden, as Icecast's; `/<mount>.xspf`
//! is `application/xspf+xml`, Icecast's `xspf.xsl` over the stats of that one mount with hidden
//! mounts left out, so a hidden or absent mount gives an empty `trackList`.

use std::net::SocketAddr;

use crate::net::conn::Conn;
use throng_proto::http::RequestHead;
use throng_proto::xml::escape_text;

use crate::admin::status::bitrate;
use crate::ctx::ServerCtx;
use crate::mount::live::Mount;
use crate::respond::reply;

/// Content-Type of `.m3u` playlists, as Icecast 2.4.4 sends it.
pub const M3U_TYPE: &str = "audio/x-mpegurl";
/// Content-Type of `.xspf` playlists (the `media-type` of Icecast 2.4.4's `xspf.xsl`).
pub const XSPF_TYPE: &str = "application/xspf+xml";

/// Whether `path` asks for a generated playlist (ends `.m3u` or `.xspf` after a mount name).
pub fn is_playlist(path: &str) -> bool {
    split(path).is_some()
}

/// The mount a playlist path names and whether it is `.xspf` (else `.m3u`).
fn split(path: &str) -> Option<(&str, bool)> {
    let (mount, xspf) = if let Some(m) = path.strip_suffix(".m3u") {
        (m, false)
    } else {
        (path.strip_suffix(".xspf")?, true)
    };
    (mount.len() > 1 && mount.starts_with('/')).then_some((mount, xspf))
}

/// The origin a playlist points listeners at: `http://<Host header>` as the visitor typed it,
/// or `http://<hostname>:<port>` from the configuration when the request has no `Host`
/// (Icecast 2.4.4 `fserve.c` builds `.m3u` so; Throng builds `.xspf` the same way, so a
/// visitor on another machine never gets `localhost`).
pub fn origin(host: Option<&str>, fallback_host: &str, port: u16) -> String {
    match host.map(str::trim).filter(|h| !h.is_empty()) {
        // A Host header cannot break a line: it was one header line itself.
        Some(h) => format!("http://{h}"),
        None => format!("http://{fallback_host}:{port}"),
    }
}

/// The `.m3u` body: one line, `<origin><mount>\r\n` (see [`origin`]).
pub fn m3u(host: Option<&str>, fallback_host: &str, port: u16, mount: &str) -> String {
    format!("{}{mount}\r\n", origin(host, fallback_host, port))
}

fn leaf(out: &mut String, indent: &str, name: &str, text: &str) {
    out.push_str(indent);
    if text.is_empty() {
        out.push_str(&format!("<{name}/>\n"));
        return;
    }
    out.push_str(&format!("<{name}>"));
    escape_text(text, out);
    out.push_str(&format!("</{name}>\n"));
}

/// The `.xspf` body for `mount` (`None`: hidden or absent), laid out as Icecast 2.4.4's
/// `xspf.xsl` output: empty playlist `title` and `creator`, and per mount a `track` with
/// `location` (`origin` and the mount's path, `origin` as [`origin`] gives it), `creator` (Ogg artist, when known), `title` (the current
/// title), an `annotation` of its stream facts and `info` (its URL).
pub fn xspf(origin: &str, mount: Option<&Mount>) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<playlist xmlns=\"http://xspf.org/ns/0/\" version=\"1\">\n  <title/>\n  <creator/>\n  <trackList>\n",
    );
    if let Some(m) = mount {
        let description = m.description();
        let info = &description.info;
        out.push_str("    <track>\n");
        let ind = "      ";
        leaf(
            &mut out,
            ind,
            "location",
            &format!("{origin}{}", throng_proto::mount_name::href_path(&m.name)),
        );
        if let Some(a) = m.ogg_tags.artist() {
            leaf(&mut out, ind, "creator", &a);
        }
        leaf(&mut out, ind, "title", &m.title());
        let mut note = format!(
            "Stream Title: {}\nStream Description: {}\nContent Type:{}\n",
            info.name, info.description, m.settings.content_type
        );
        if let Some(b) = bitrate(m) {
            note.push_str(&format!("Bitrate: {b}\n"));
        }
        note.push_str(&format!(
            "Current Listeners: {}\nPeak Listeners: {}\n",
            m.listeners.load(std::sync::atomic::Ordering::Relaxed),
            m.listener_peak.load(std::sync::atomic::Ordering::Relaxed)
        ));
        if !info.genre.is_empty() {
            note.push_str(&format!("Stream Genre: {}", info.genre));
        }
        leaf(&mut out, ind, "annotation", note.trim_end());
        leaf(&mut out, ind, "info", info.url.as_deref().unwrap_or(""));
        out.push_str("    </track>\n");
    }
    out.push_str("  </trackList>\n</playlist>\n");
    out
}

/// Answers `GET`/`HEAD` of a playlist path (see [`is_playlist`]) with `200` and the playlist.
pub async fn serve(ctx: &ServerCtx, stream: &mut Conn, head: &RequestHead, peer: SocketAddr) {
    let Some((mount, is_xspf)) = split(&head.path) else {
        return;
    };
    let (ctype, body) = if is_xspf {
        let live = ctx.registry.get(mount).filter(|m| !m.hidden());
        let origin = origin(head.header("host"), &ctx.config().hostname, ctx.port);
        (XSPF_TYPE, xspf(&origin, live.as_deref()))
    } else {
        let body = m3u(head.header("host"), &ctx.config().hostname, ctx.port, mount);
        (M3U_TYPE, body)
    };
    let body = if head.method == "HEAD" { "" } else { &body };
    let _ = reply(
        ctx,
        stream,
        peer,
        Some(head),
        200,
        &[
            ("Content-Type", ctype),
            ("Access-Control-Allow-Origin", "*"),
        ],
        body,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn playlist_paths_and_m3u_body() {
        assert_eq!(split("/live.mp3.m3u"), Some(("/live.mp3", false)));
        assert_eq!(split("/live.xspf"), Some(("/live", true)));
        assert_eq!(split("/.m3u"), None);
        assert_eq!(split("/live.mp3"), None);
        assert_eq!(
            m3u(Some("radio.example:8000"), "localhost", 8000, "/live.mp3"),
            "http://radio.example:8000/live.mp3\r\n"
        );
        assert_eq!(
            m3u(None, "localhost", 8001, "/a"),
            "http://localhost:8001/a\r\n"
        );
        assert_eq!(
            origin(Some(" 10.0.0.5:8000 "), "localhost", 8000),
            "http://10.0.0.5:8000"
        );
    }
}
