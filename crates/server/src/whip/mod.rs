//! WHIP ingest (RFC 9725): a browser or any WHIP client goes live on a mount with
//! `POST /whip/<mount>`, an SDP offer (`application/sdp`) sending Opus, and the mount's source
//! credentials (`Authorization: Bearer <source password>` as WHIP clients send, or HTTP Basic as
//! every source client sends: `credentials.rs`). The answer is `201 Created` with the SDP answer
//! and `Location: /whip/<mount>/<id>`; `DELETE` on that resource ends the publish; `OPTIONS`
//! answers the CORS preflight with `Accept-Post: application/sdp`; `PATCH` (trickle ICE, ICE
//! restart by PATCH, RFC 9725 §4.4 makes them optional) is `405`: a publisher that lost its
//! connection posts a new offer instead.
//!
//! The received Opus becomes Ogg/Opus pages (`ogg_mux.rs`) fed to the mount like a source
//! client's stream (`publish.rs`), so fallbacks, ICY listeners, HLS, WHEP viewers and relays
//! see an ordinary live Ogg/Opus mount. A new offer with the same credentials while a publish
//! holds the mount replaces its WebRTC session once that session is off the air (no audio for
//! `publish::ON_AIR`) and keeps the mount, its listeners and its Ogg stream (`liveness.rs`): a
//! reconnect within `source-timeout` causes no fallback flap; onto a publish on the air it gets
//! `409`. `DELETE` needs the publish's credentials too, and an offer whose audio does not send
//! (`recvonly`, `inactive`) is refused (issue 42).
//!
//! The media travels over the WHEP engines' UDP port (`[webrtc] udp-listen`): the answer's ICE
//! candidate is the first engine's address, and the engines hand the datagrams of the WHIP
//! sessions' ICE ufrags to them (`fanout/whep/divert.rs`). WHIP needs `[webrtc]` on (`404`
//! otherwise). The offer is read as a WHEP offer is (`whep::read_offer`: at most
//! `MAX_OFFER_BYTES`, within `body-timeout`), and only after the credentials are checked.

pub mod credentials;
pub mod liveness;
pub mod ogg_mux;
pub mod publish;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use throng_proto::format::Format;
use throng_proto::http::{simple_response, RequestHead};
use throng_proto::source_info::SourceInfo;
use tokio::io::AsyncWriteExt;

use crate::auth::throttle::LoginKind;
use crate::auth::SourceAuth;
use crate::ctx::ServerCtx;
use crate::ingest::live_mount::LiveMount;
use crate::ingest::source::valid_mount_name;
use crate::mount::feeder::Feeder;
use crate::mount::live::{Announcement, Mount, SourceKind};
use crate::net::conn::Conn;
use crate::respond::reply;
use crate::whep::{content_length, offer_check, read_offer, OfferCheck, CORS};
use liveness::{on_offer, Holder, OfferAction};

/// Path prefix of WHIP endpoints: `POST /whip/<mount>`.
pub const PREFIX: &str = "/whip";

/// The challenge of a `401`: Bearer (RFC 6750 §3), which browsers never turn into a login
/// dialog over the Go-live page; Basic credentials are accepted all the same.
const CHALLENGE: (&str, &str) = ("WWW-Authenticate", "Bearer realm=\"throng WHIP\"");

/// Whether `path` is a WHIP endpoint or resource (`/whip/...`).
pub fn is_whip_path(path: &str) -> bool {
    path.starts_with("/whip/")
}

/// The mount and session id of a WHIP resource path after [`PREFIX`] (`/<mount>/<id>`).
pub fn resource(rest: &str) -> Option<(&str, &str)> {
    let (mount, id) = rest.rsplit_once('/')?;
    (!mount.is_empty() && !id.is_empty()).then_some((mount, id))
}

/// Serves a WHIP request whose head is `head` and whose first body bytes are `body`.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
) {
    let mut headers: Vec<(&str, &str)> = CORS.to_vec();
    if ctx.whep.is_none() {
        let msg = "WebRTC is off ([webrtc] udp-listen)\n";
        let _ = reply(&ctx, &mut stream, peer, Some(&head), 404, &headers, msg).await;
        return;
    }
    let rest = head.path[PREFIX.len()..].to_owned();
    match head.method.as_str() {
        "OPTIONS" => {
            headers.push(("Accept-Post", "application/sdp"));
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 204, &headers, "").await;
        }
        "DELETE" => {
            // The publish's own credentials end it (a WHIP client sends them on DELETE as on
            // POST, RFC 9725 §4.3), not the knowledge of its resource URL alone.
            let Some((mount, id)) = resource(&rest) else {
                let _ = reply(&ctx, &mut stream, peer, Some(&head), 404, &headers, "").await;
                return;
            };
            let Some((user, _)) = authenticate(&ctx, &head, peer, mount).await else {
                headers.push(CHALLENGE);
                let msg = "Authentication required\n";
                let _ = reply(&ctx, &mut stream, peer, Some(&head), 401, &headers, msg).await;
                return;
            };
            let stopped = match publish::find(&ctx, mount) {
                Some(p) if p.user == user => p.stop(id).await,
                _ => false,
            };
            let status = if stopped { 200 } else { 404 };
            if stopped {
                tracing::info!(%peer, %mount, "WHIP publish ended by DELETE");
            }
            let _ = reply(&ctx, &mut stream, peer, Some(&head), status, &headers, "").await;
        }
        "POST" => Box::pin(post(ctx, stream, head, body, peer, rest)).await,
        _ => {
            headers.push(("Allow", "POST, DELETE, OPTIONS"));
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 405, &headers, "").await;
        }
    }
}

/// The source user a publish request logs in as, or `None` (logged, the failure counted by
/// the login throttle): the mount's URL `stream-auth` when configured, else the mount's
/// source user and password (`Config::source_credentials`) against Basic or Bearer.
async fn authenticate(
    ctx: &ServerCtx,
    head: &RequestHead,
    peer: SocketAddr,
    mount: &str,
) -> Option<(String, String)> {
    let presented = credentials::presented(head.header("authorization"));
    let accepted = match ctx.auth().authorize_source(head, peer, mount, false).await {
        SourceAuth::Accepted { user, pass } => Some((user, pass)),
        SourceAuth::Refused => None,
        SourceAuth::Unconfigured => match ctx.config().source_credentials(mount) {
            Some((user, pass)) => presented
                .as_ref()
                .is_some_and(|p| credentials::matches(p, &user, &pass))
                .then_some((user, pass)),
            None => {
                tracing::warn!(%peer, %mount, "WHIP publish rejected: no source password configured");
                None
            }
        },
    };
    if accepted.is_none() {
        if presented.is_some() {
            // Debug: a flood of offers is a flood of lines otherwise; the failed login is
            // counted and logged for fail2ban by the throttle.
            tracing::debug!(%peer, %mount, "WHIP publish rejected: wrong credentials");
            let user = match &presented {
                Some(credentials::Presented::Basic { user, .. }) => Some(user.as_str()),
                _ => None,
            };
            ctx.auth()
                .login_failed(peer.ip(), LoginKind::Source, user, Some(mount));
        } else {
            tracing::debug!(%peer, %mount, "WHIP publish without credentials: 401");
        }
    }
    accepted
}

/// `POST /whip/<mount>`: a publish, or a reconnect of the publish holding the mount.
async fn post(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
    requested: String,
) {
    let cors: Vec<(&str, &str)> = CORS.to_vec();
    let is_sdp = head
        .header("content-type")
        .is_some_and(|t| t.trim().starts_with("application/sdp"));
    let len = match offer_check(is_sdp, content_length(&head.headers), &requested) {
        OfferCheck::Read(n) => n,
        OfferCheck::Refuse(status, message) => {
            let _ = reply(&ctx, &mut stream, peer, Some(&head), status, &cors, message).await;
            return;
        }
    };
    if !valid_mount_name(&requested) {
        let msg = "Invalid mountpoint\n";
        let _ = reply(&ctx, &mut stream, peer, Some(&head), 400, &cors, msg).await;
        return;
    }
    if head.header("authorization").is_some() {
        if let Err(wait) = ctx.auth().login_blocked(peer.ip()) {
            let retry = wait.as_secs().max(1).to_string();
            let mut h = cors.clone();
            h.push(("Retry-After", retry.as_str()));
            let msg = crate::auth::THROTTLED_MESSAGE;
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 429, &h, msg).await;
            return;
        }
    }
    let Some((user, pass)) = authenticate(&ctx, &head, peer, &requested).await else {
        let mut h = cors.clone();
        h.push(CHALLENGE);
        let msg = "Authentication required\n";
        let _ = reply(&ctx, &mut stream, peer, Some(&head), 401, &h, msg).await;
        return;
    };
    let Some(offer) = read_offer(&ctx, &mut stream, &head, peer, body, len, &cors).await else {
        return;
    };
    let engine = ctx.whep.clone().expect("checked by handle");
    let (candidate, _) = engine.divert_socket();
    let (session, answer) =
        match publish::answer(&offer, candidate, engine.divert(), Instant::now()) {
            Ok(ok) => ok,
            Err(e) => {
                tracing::info!(%peer, mount = %requested, "WHIP offer refused: {e}");
                let msg = format!("{e}\n");
                let _ = reply(&ctx, &mut stream, peer, Some(&head), 400, &cors, &msg).await;
                return;
            }
        };
    let id = session.id.clone();
    let current = publish::find(&ctx, &requested);
    let holder = match &current {
        Some(p) => Holder::Whip {
            same_credentials: p.user == user,
        },
        None if ctx.registry.get(&requested).is_some() => Holder::Other,
        None => Holder::Nobody,
    };
    let mut session = Some(session);
    match on_offer(holder) {
        OfferAction::InUse => {
            tracing::warn!(%peer, mount = %requested, "WHIP publish rejected: mountpoint in use");
            let msg = "Mountpoint in use\n";
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 403, &cors, msg).await;
            return;
        }
        OfferAction::Replace => {
            let p = current.expect("a WHIP holder");
            if p.is_connected() {
                // A publish on the air keeps its mount: a second POST (a second tab, a
                // leaked password) never replaces it with a session that may never connect.
                tracing::info!(%peer, mount = %requested, "WHIP offer refused: a connected publish holds the mount");
                let msg = "A connected publish holds this mount; end it first (DELETE)\n";
                let _ = reply(&ctx, &mut stream, peer, Some(&head), 409, &cors, msg).await;
                return;
            }
            if p.replace(session.take().expect("not used yet")) {
                tracing::info!(%peer, mount = %requested, "WHIP publisher reconnecting");
            } else {
                // The publish ended meanwhile: the mount is free again (or taken), so retry.
                let msg = "The publish ended meanwhile; post again\n";
                let mut h = cors.clone();
                h.push(("Retry-After", "1"));
                let _ = reply(&ctx, &mut stream, peer, Some(&head), 503, &h, msg).await;
                return;
            }
        }
        OfferAction::Start => {
            let config = ctx.config();
            let (mount, writer) = Mount::configured(
                &config,
                &requested,
                Announcement {
                    format: Format::Ogg,
                    content_type: "audio/ogg".to_owned(),
                    info: SourceInfo::default(),
                    credentials: (user.clone(), pass),
                    source_ip: Some(peer.ip()),
                    kind: SourceKind::Client,
                    force_hidden: false,
                },
            );
            let live = match LiveMount::reserve(ctx.clone(), mount.clone(), config.limits.sources) {
                Ok(live) => live,
                Err(e) => {
                    tracing::warn!(%peer, mount = %requested, "WHIP publish rejected: {e}");
                    let msg = format!("{e}\n");
                    let _ = reply(&ctx, &mut stream, peer, Some(&head), 403, &cors, &msg).await;
                    return;
                }
            };
            ctx.metrics.source_connects.inc();
            // The resource id is a capability: never in an info line.
            tracing::info!(%peer, mount = %requested, "WHIP publish started");
            tracing::debug!(mount = %requested, %id, "WHIP publish resource");
            let feeder = Feeder::new(mount.clone(), writer, None, ctx.metrics.clone());
            let origin = publish::Origin {
                peer,
                request_line: head.request_line(),
                agent: head.header("user-agent").map(str::to_owned),
                referer: head.header("referer").map(str::to_owned),
            };
            let session = session.take().expect("not used yet");
            publish::start(ctx.clone(), mount, feeder, live, session, user, origin);
        }
    }
    let location = format!("{PREFIX}{requested}/{id}");
    let mut h = cors.clone();
    h.push(("Content-Type", "application/sdp"));
    h.push(("Location", &location));
    let bytes = simple_response(201, &h, &answer);
    if stream.write_all(&bytes).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_name_a_mount_and_a_session() {
        assert_eq!(resource("/live.opus/abc"), Some(("/live.opus", "abc")));
        assert_eq!(resource("/a/b/c"), Some(("/a/b", "c")));
        assert_eq!(resource("/live.opus"), None);
        assert_eq!(resource("/live.opus/"), None);
        assert!(is_whip_path("/whip/x"));
        assert!(!is_whip_path("/whipx"));
    }
}
