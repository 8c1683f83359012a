//! Binary upgrade in place (SIGUSR2): start the binary at the server's own path and hand it the
//! listening sockets, every source and every listener with its stream position.

use crate::ctx::ServerCtx;

/// Starts the new binary and hands it every socket.
pub async fn upgrade(_ctx: &ServerCtx) {
    tracing::warn!("binary upgrade is not supported yet");
}
