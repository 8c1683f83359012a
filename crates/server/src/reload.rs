//! Operator commands carried out on a running server: reload the configuration (SIGHUP, admin
//! `reloadconfig`), reopen the log files (SIGUSR1) and upgrade the binary in place (SIGUSR2).

use crate::ctx::ServerCtx;

/// Re-reads the configuration and applies it; `Err` says why it was refused.
pub async fn reload(_ctx: &ServerCtx) -> Result<String, String> {
    tracing::warn!("configuration reload is not supported yet");
    Err("configuration reload is not supported yet".into())
}

/// Reopens the access and error logs.
pub fn reopen_logs(_ctx: &ServerCtx) {
    tracing::warn!("log reopening is not supported yet");
}

/// Starts the new binary and hands it every socket.
pub async fn upgrade(_ctx: &ServerCtx) {
    tracing::warn!("binary upgrade is not supported yet");
}
