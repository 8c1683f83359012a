//! WHEP (draft-ietf-wish-whep) requests: `POST /whep/<mount>` with an SDP offer
//! (`application/sdp`) answers `201 Created` with the SDP answer and `Location:
//! /whep/<mount>/<session>`; `DELETE` on that resource ends the session; `OPTIONS` answers the
//! browser's CORS preflight with `Accept-Post: application/sdp`. The POST is a listener
//! request: the mount's listener authentication, max-listeners and fallbacks apply as for a
//! `GET`. The media itself is the WHEP engine's (`fanout/whep.rs`).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::conn::Conn;
use throng_proto::format::Format;
use throng_proto::http::RequestHead;
use tokio::io::AsyncReadExt;

use crate::auth::ListenerAuth;
use crate::ctx::ServerCtx;
use crate::fanout::whep::NewViewer;
use crate::respond::reply;

/// Path prefix of WHEP endpoints: `POST /whep/<mount>`.
pub const PREFIX: &str = "/whep";

/// Largest SDP offer read, in bytes.
pub const MAX_OFFER_BYTES: usize = 64 * 1024;

/// CORS headers of every WHEP answer (browsers POST from the station page or elsewhere).
const CORS: &[(&str, &str)] = &[
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

/// The WHEP endpoint URL of an Ogg mount (`http://<hostname>:<port>/whep<mount>`), `None`
/// when WebRTC is off or the mount is not Ogg.
pub fn whep_url(ctx: &ServerCtx, m: &crate::mount::live::Mount) -> Option<String> {
    (ctx.whep.is_some() && m.settings.format == Format::Ogg).then(|| {
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

/// `POST /whep/<mount>`: a new viewer.
async fn post(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    mut body: Vec<u8>,
    peer: SocketAddr,
    requested: String,
) {
    let cors: Vec<(&str, &str)> = CORS.to_vec();
    let engine = ctx.whep.clone().expect("checked by handle");
    let len: usize = head
        .header("content-length")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if len == 0 || len > MAX_OFFER_BYTES {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            400,
            &cors,
            "SDP offer expected\n",
        )
        .await;
        return;
    }
    let read = tokio::time::timeout(ctx.config().header_timeout(), async {
        while body.len() < len {
            if stream.read_buf(&mut body).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return;
    }
    body.truncate(len);
    let is_sdp = head
        .header("content-type")
        .is_some_and(|t| t.trim().starts_with("application/sdp"));
    let Ok(offer) = String::from_utf8(body) else {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            400,
            &cors,
            "SDP offer expected\n",
        )
        .await;
        return;
    };
    if !is_sdp {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            415,
            &cors,
            "application/sdp expected\n",
        )
        .await;
        return;
    }
    if !throng_proto::mount_name::is_canonical(&requested) {
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
    }
    let id = ctx.next_id();
    let user = match ctx
        .auth()
        .authorize_listener(&head, peer, &requested, id)
        .await
    {
        ListenerAuth::Allowed { user, .. } => user,
        ListenerAuth::Refused {
            status,
            message,
            retry_after,
        } => {
            crate::respond::refuse_listener(
                &ctx,
                &mut stream,
                peer,
                &head,
                &cors,
                status,
                &message,
                retry_after,
            )
            .await;
            return;
        }
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
    if mount.settings.format != Format::Ogg {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            415,
            &cors,
            "Not an Ogg/Opus mount\n",
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
    let viewer = NewViewer {
        mount,
        requested: requested.clone(),
        offer,
        peer,
        listener_id: id,
        agent: head.header("user-agent").map(str::to_owned),
        referer: head.header("referer").map(str::to_owned),
        user,
    };
    match engine.add(viewer).await {
        Ok(created) => {
            let location = format!("{PREFIX}{requested}/{}", created.id);
            let mut h = cors.clone();
            h.push(("Content-Type", "application/sdp"));
            h.push(("Location", &location));
            let _ = reply(
                &ctx,
                &mut stream,
                peer,
                Some(&head),
                201,
                &h,
                &created.answer,
            )
            .await;
        }
        Err(e) => {
            tracing::info!(%peer, mount = %requested, "WHEP offer refused: {e}");
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
