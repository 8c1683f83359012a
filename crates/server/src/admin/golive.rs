//! The Go-live page, `/admin/ui/golive` (`?mount=/x` fills in the mount): a DJ goes live on a
//! mount from the browser, with no encoder to install. The page picks the input device
//! (`enumerateDevices`), shows its level (a WebAudio `AnalyserNode`), publishes it over WHIP
//! (`POST /whip/<mount>` with the mount's source credentials typed in, `DELETE` of the
//! resource to stop: `whip/`), posts again when the connection drops (the server keeps the mount
//! through a reconnect within `source-timeout`), and shows the mount's listeners from
//! `/api/v1/status`. The script is `static/golive.js` (standards-only, no build step, like the
//! rest of the admin UI's; a webroot copy replaces it).
//!
//! The page holds no secret and needs no admin login: the DJ has the source password, not the
//! admin's, and the WHIP endpoint checks it (wrong credentials are `401`, logged and counted
//! by the login throttle). Browsers only give a page the microphone in a secure context:
//! HTTPS, or `localhost`.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::Response;
use throng_proto::http::parse_query;

use crate::admin::html::escape;
use crate::admin::ui;
use crate::ctx::ServerCtx;

/// The page's path.
pub const PATH: &str = "/admin/ui/golive";

/// `GET /admin/ui/golive`: the Go-live page.
pub async fn page(State(ctx): State<Arc<ServerCtx>>, RawQuery(query): RawQuery) -> Response {
    let q = parse_query(query.as_deref().unwrap_or(""));
    let mount = q
        .iter()
        .find(|(k, _)| k == "mount")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let config = ctx.config();
    // Configured mounts a source may feed (file mounts are fed by the server itself).
    let choices: String = config
        .mount
        .iter()
        .filter(|m| m.file.is_none() && !m.name.contains('*'))
        .map(|m| format!("<option value=\"{}\">", escape(&m.name)))
        .collect();
    let webrtc = if ctx.whep.is_some() {
        ""
    } else {
        "<p class=\"flash err\">WebRTC is off on this server (<code>[webrtc] udp-listen</code>): \
going live from the browser needs it.</p>"
    };
    ui::page(&ctx, "Go live", None, &content(webrtc, mount, &choices))
}

/// The page's body: the form the script drives.
fn content(webrtc: &str, mount: &str, choices: &str) -> String {
    format!(
        "{webrtc}<section class=\"card golive\" id=\"golive\">\
<p>Publish a microphone or any input of this computer to a mount over WebRTC (WHIP). \
Listeners hear it on every path the mount offers; when you stop, they move to its fallback.</p>\
<form id=\"gl-form\" class=\"stack\" autocomplete=\"on\" onsubmit=\"return false\">\
<label>Mount <input id=\"gl-mount\" name=\"mount\" list=\"gl-mounts\" required \
placeholder=\"/live.opus\" value=\"{mount}\"></label><datalist id=\"gl-mounts\">{choices}</datalist>\
<label>Source user <input id=\"gl-user\" name=\"username\" autocomplete=\"username\" value=\"source\"></label>\
<label>Source password <input id=\"gl-password\" name=\"password\" type=\"password\" \
autocomplete=\"current-password\" required></label>\
<label>Input <select id=\"gl-device\"><option value=\"\">Default input</option></select></label>\
<label>Level <meter id=\"gl-level\" min=\"0\" max=\"1\" low=\"0.6\" high=\"0.9\" optimum=\"0.3\" value=\"0\"></meter></label>\
<p class=\"row\"><button type=\"button\" id=\"gl-start\">Go live</button> \
<button type=\"button\" id=\"gl-stop\" disabled>Stop</button></p>\
</form>\
<p role=\"status\" id=\"gl-state\" data-state=\"off\">Off air</p>\
<p>Listeners: <strong id=\"gl-listeners\">–</strong></p>\
</section><script src=\"/static/golive.js\" defer></script>",
        mount = escape(mount),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_is_escaped_into_the_form() {
        let html = content("", "/a\"<b>", "<option value=\"/x\">");
        assert!(html.contains("value=\"/a&quot;&lt;b&gt;\""), "{html}");
        assert!(html.contains("id=\"gl-start\""));
        assert!(html.contains("/static/golive.js"));
    }
}
