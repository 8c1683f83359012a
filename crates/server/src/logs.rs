//! Log reopening on a running server (SIGUSR1, as nginx does): after logrotate moved the access
//! and error logs, new lines go to fresh files at the configured paths.

use crate::ctx::ServerCtx;

/// Reopens the access and error logs.
pub fn reopen(_ctx: &ServerCtx) {
    tracing::warn!("log reopening is not supported yet");
}
