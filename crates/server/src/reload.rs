//! Configuration reload on a running server (SIGHUP, admin `reloadconfig`): re-read the file,
//! validate it, apply it without dropping anyone, or refuse it and keep the running one.

use crate::ctx::ServerCtx;

/// Re-reads the configuration and applies it; `Err` says why it was refused.
pub async fn reload(_ctx: &ServerCtx) -> Result<String, String> {
    tracing::warn!("configuration reload is not supported yet");
    Err("configuration reload is not supported yet".into())
}
