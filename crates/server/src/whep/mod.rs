//! WHEP (draft-ietf-wish-whep) requests: `POST /whep/<mount>` with an SDP offer
//! (`application/sdp`) answers `201 Created` with the SDP answer and `Location:
//! /whep/<mount>/<session>`; `DELETE` on that resource ends the session; `OPTIONS` answers the
//! browser's CORS preflight with `Accept-Post: application/sdp`. The POST is a listener
//! request: the mount's listener authentication, max-listeners and fallbacks apply as for a
//! `GET`. The media itself is the WHEP engines' (`fanout/whep/`).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::conn::Conn;
use throng_proto::http::simple_response;
use throng_proto::http::RequestHead;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::audience::{AudiencePath, ListenerInfo};
use crate::ctx::ServerCtx;
use crate::fanout::whep::NewViewer;
use crate::net::clients::HeadLimits;
use crate::respond::{admit_listener, reply, Admitted, RETRY_AFTER_SECS};
use crate::transcode::whep_feed;

/// Path prefix of WHEP endpoints: `POST /whep/<mount>`.
pub const PREFIX: &str = "/whep";

/// Largest SDP offer read, in bytes: the limit of every request body (`/api/v1/`,
/// `admin/api.rs`); a browser's offer is a few KiB.
pub const MAX_OFFER_BYTES: usize = crate::respond::MAX_BODY_BYTES;

/// CORS headers of every WHEP and WHIP answer (browsers POST from the station page, the
/// Go-live page or elsewhere).
pub const CORS: &[(&str, &str)] = &[
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Methods", "POST, DELETE, OPTIONS"),
    (
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type",
    ),
    ("Access-Control-Expose-Headers", "Location"),
];

/// Whether `path` is a WHEP endpoint or resource (`/whep/...`).
pub fn is_whep_path(path: &str) -> bool {
    path.starts_with("/whep/")
}

/// The WHEP endpoint URL of a mount WebRTC plays (`http://<hostname>:<port>/whep<mount>`):
/// Ogg/Opus, MP3 and AAC ([`whep_feed`]); `None` when WebRTC is off or the mount is of
/// another format.
pub fn whep_url(ctx: &ServerCtx, m: &crate::mount::live::Mount) -> Option<String> {
    (ctx.whep.is_some() && whep_feed(m.settings.format).is_some()).then(|| {
        format!(
            "http://{}:{}{PREFIX}{}",
            ctx.config().hostname,
            ctx.port,
            m.name
        )
    })
}

/// Serves a WHEP request whose head is `head` and whose first body bytes are `body`.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
) {
    let mut headers: Vec<(&str, &str)> = CORS.to_vec();
    let Some(engine) = ctx.whep.clone() else {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            404,
            &headers,
            "WebRTC is off\n",
        )
        .await;
        return;
    };
    let rest = head.path[PREFIX.len()..].to_owned();
    match head.method.as_str() {
        "OPTIONS" => {
            headers.push(("Accept-Post", "application/sdp"));
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 204, &headers, "").await;
        }
        "DELETE" => {
            let id = rest.rsplit('/').next().unwrap_or("");
            let status = if engine.remove(id).await { 200 } else { 404 };
            let _ = reply(&ctx, &mut stream, peer, Some(&head), status, &headers, "").await;
        }
        "POST" => Box::pin(post(ctx, stream, head, body, peer, rest)).await,
        _ => {
            headers.push(("Allow", "POST, DELETE, OPTIONS"));
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 405, &headers, "").await;
        }
    }
}

/// `POST /whep/<mount>`: a new viewer. Everything the head decides (content type, length,
/// mount name, listener authentication) is checked before the body is read, so a refused
/// client never gets the server to read (or wait for) its body; the body is capped at
/// [`MAX_OFFER_BYTES`] (`413` above).
async fn post(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
    requested: String,
) {
    let cors: Vec<(&str, &str)> = CORS.to_vec();
    let engine = ctx.whep.clone().expect("checked by handle");
    let len = content_length(&head.headers);
    let is_sdp = head
        .header("content-type")
        .is_some_and(|t| t.trim().starts_with("application/sdp"));
    let len = match offer_check(is_sdp, len, &requested) {
        OfferCheck::Read(n) => n,
        OfferCheck::Refuse(status, message) => {
            let _ = reply(&ctx, &mut stream, peer, Some(&head), status, &cors, message).await;
            return;
        }
    };
    // A draining server sends new viewers on (`cluster/drain.rs`): `307`, so the browser posts
    // the same offer there (draft-ietf-wish-whep-04 lets an endpoint redirect the offer with
    // `307`, as WHIP, RFC 9725, does for load balancing).
    if crate::cluster::redirect::turn_away(&ctx, &mut stream, &head, peer, 307, &cors).await {
        return;
    }
    // A session costs the engine its WebRTC state until its peer connects: such sessions are
    // capped per address and in all, before anything else is spent on the offer.
    let per_address = HeadLimits::configured(&ctx.config().limits, false).per_address;
    let unconnected = match engine.reserve(peer.ip(), per_address) {
        Ok(unit) => unit,
        Err(why) => {
            tracing::info!(%peer, mount = %requested, "WHEP offer refused: {why}");
            let mut h = cors.clone();
            h.push(("Retry-After", RETRY_AFTER_SECS));
            let message = format!("{why}\n");
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 503, &h, &message).await;
            return;
        }
    };
    let Some(Admitted {
        id,
        user,
        time_limit,
        on_close,
    }) = admit_listener(
        &ctx,
        &mut stream,
        peer,
        &head,
        &requested,
        &cors,
        "WHEP offer",
    )
    .await
    else {
        return;
    };
    let Some(offer) = read_offer(&ctx, &mut stream, &head, peer, body, len, &cors).await else {
        return;
    };
    let Some(mount) = ctx.registry.resolve(&requested) else {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            404,
            &cors,
            "No such mount\n",
        )
        .await;
        return;
    };
    if whep_feed(mount.settings.format).is_none() {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            415,
            &cors,
            "WebRTC plays Ogg/Opus, MP3 and AAC mounts only\n",
        )
        .await;
        return;
    }
    if !mount.try_add_listener() {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            403,
            &cors,
            "max listeners reached\n",
        )
        .await;
        return;
    }
    // The same time limit as an ICY listener's: max-listener-duration, URL-auth time limit.
    let limit = ctx.config().listening_limit(&requested, time_limit);
    let started = std::time::Instant::now();
    let mut viewer = NewViewer {
        mount,
        offer,
        peer,
        info: ListenerInfo {
            id,
            path: AudiencePath::Whep,
            ip: peer.ip(),
            request_line: head.request_line(),
            agent: crate::audience::record::kept_header(head.header("user-agent")),
            referer: crate::audience::record::kept_header(head.header("referer")),
            started,
            requested_mount: requested.clone(),
            user,
            deadline: limit.map(|l| started + l),
            on_close,
            ledger: None,
        },
        unconnected,
    };
    // Recorded once the offer is taken; a viewer the engine refuses is dropped with its
    // ticket, which takes the row back.
    viewer.info.open_in_ledger(ctx.ledger.as_ref(), false);
    match engine.add(viewer).await {
        Ok(created) => {
            let location = format!("{PREFIX}{requested}/{}", created.id);
            let mut h = cors.clone();
            h.push(("Content-Type", "application/sdp"));
            h.push(("Location", &location));
            // Not logged here: the session's access-log line is written when it ends, with
            // its duration and bytes, as a listener's is.
            let bytes = simple_response(201, &h, &created.answer);
            if stream.write_all(&bytes).await.is_ok() {
                let _ = stream.shutdown().await;
            }
        }
        Err(e) => {
            tracing::info!(%peer, mount = %requested, "WHEP offer refused: {}", e.detail());
            let _ = reply(
                &ctx,
                &mut stream,
                peer,
                Some(&head),
                400,
                &cors,
                &format!("{e}\n"),
            )
            .await;
        }
    }
}

/// Reads the rest of an SDP offer (`body` holds its first bytes; `len` bytes in all) within
/// `body-timeout` (as an `/api/v1/` body) and checks it offers Opus ([`offers_opus`]). Answers
/// the refusal itself (`408` late, `400` not UTF-8 or without Opus, with `cors`) and returns
/// `None` then, or when the peer went away. WHEP and WHIP offers are read by this one rule.
pub async fn read_offer(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    mut body: Vec<u8>,
    len: usize,
    cors: &[(&str, &str)],
) -> Option<String> {
    let read = tokio::time::timeout(ctx.config().body_timeout(), async {
        while body.len() < len {
            if stream.read_buf(&mut body).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    match read {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return None,
        Err(_) => {
            tracing::info!(%peer, path = %head.path, "offer body not complete within body-timeout");
            let _ = reply(ctx, stream, peer, Some(head), 408, cors, "Body timed out\n").await;
            return None;
        }
    }
    body.truncate(len);
    match String::from_utf8(body) {
        Ok(o) if offers_opus(&o) => Some(o),
        bad => {
            let message = if bad.is_ok() {
                "the offer has no audio section offering Opus (opus/48000/2)\n"
            } else {
                "SDP offer expected\n"
            };
            let _ = reply(ctx, stream, peer, Some(head), 400, cors, message).await;
            None
        }
    }
}

/// What the head of a WHEP `POST` allows, before its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferCheck {
    /// Read this many body bytes (then authenticate and parse).
    Read(usize),
    /// Answer this status and message without reading the body: `415` when the
    /// `Content-Type` is not `application/sdp` (WHEP draft §4.2), `400` without a
    /// `Content-Length` (or zero), `413` above [`MAX_OFFER_BYTES`], `404` for a mount name that
    /// is not canonical.
    Refuse(u16, &'static str),
}

/// The body length `headers` announce: `Some(Ok(n))` for exactly one `Content-Length` of one
/// decimal value and no `Transfer-Encoding`; `Some(Err(()))` for anything else a request
/// smuggler could use (two `Content-Length` headers or a list, a non-number, a
/// `Transfer-Encoding`: RFC 9112 section 6.3 makes them invalid or ambiguous, and an offer is
/// never chunked); `None` when there is none.
pub fn content_length(headers: &[(String, String)]) -> Option<Result<usize, ()>> {
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Some(Err(()));
    }
    let mut lengths = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"));
    let first = lengths.next()?;
    if lengths.next().is_some() {
        return Some(Err(()));
    }
    let v = first.1.trim();
    Some(if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        v.parse().map_err(|_| ())
    } else {
        Err(())
    })
}

/// Whether SDP `sdp` has an audio media section whose formats include a payload type mapped to
/// Opus (`a=rtpmap:<pt> opus/48000/2`, RFC 7587 section 7): without one the server has
/// nothing to send (a PCMU-only offer was answered `201` and held a listener slot).
pub fn offers_opus(sdp: &str) -> bool {
    let mut formats: Vec<&str> = Vec::new();
    let mut in_audio = false;
    for line in sdp.lines().map(str::trim_end) {
        if let Some(m) = line.strip_prefix("m=") {
            let mut parts = m.split_whitespace();
            in_audio = parts.next() == Some("audio");
            // m=audio <port> <proto> <fmt> ...
            formats = if in_audio {
                parts.skip(2).collect()
            } else {
                Vec::new()
            };
        } else if in_audio {
            if let Some(map) = line.strip_prefix("a=rtpmap:") {
                let mut it = map.splitn(2, ' ');
                let (pt, codec) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
                if formats.contains(&pt) && codec.to_ascii_lowercase().starts_with("opus/48000") {
                    return true;
                }
            }
        }
    }
    false
}

/// Decides from the head alone whether to read a WHEP offer's body: `is_sdp` (the
/// `Content-Type`), `len` (the `Content-Length` as [`content_length`] reads it) and the mount
/// name `requested`.
pub fn offer_check(is_sdp: bool, len: Option<Result<usize, ()>>, requested: &str) -> OfferCheck {
    if !is_sdp {
        return OfferCheck::Refuse(415, "application/sdp expected\n");
    }
    let len = match len {
        Some(Err(())) => {
            return OfferCheck::Refuse(
                400,
                "exactly one Content-Length of a decimal number, and no Transfer-Encoding\n",
            )
        }
        Some(Ok(n)) => Some(n),
        None => None,
    };
    match len {
        None | Some(0) => OfferCheck::Refuse(400, "SDP offer expected\n"),
        Some(n) if n > MAX_OFFER_BYTES => OfferCheck::Refuse(413, "SDP offer too large\n"),
        Some(_) if !throng_proto::mount_name::is_canonical(requested) => {
            OfferCheck::Refuse(404, "No such mount\n")
        }
        Some(n) => OfferCheck::Read(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_decides_before_the_body_is_read() {
        assert_eq!(
            offer_check(true, Some(Ok(300)), "/a.opus"),
            OfferCheck::Read(300)
        );
        assert_eq!(
            offer_check(false, Some(Ok(300)), "/a.opus").status(),
            Some(415)
        );
        assert_eq!(offer_check(true, None, "/a.opus").status(), Some(400));
        assert_eq!(
            offer_check(true, Some(Ok(0)), "/a.opus").status(),
            Some(400)
        );
        assert_eq!(
            offer_check(true, Some(Ok(MAX_OFFER_BYTES)), "/a.opus"),
            OfferCheck::Read(MAX_OFFER_BYTES)
        );
        assert_eq!(
            offer_check(true, Some(Ok(MAX_OFFER_BYTES + 1)), "/a.opus").status(),
            Some(413)
        );
        assert_eq!(
            offer_check(true, Some(Ok(300)), "/../x").status(),
            Some(404)
        );
    }

    impl OfferCheck {
        fn status(self) -> Option<u16> {
            match self {
                OfferCheck::Refuse(s, _) => Some(s),
                OfferCheck::Read(_) => None,
            }
        }
    }
}
