//! Relays (origin → edge): a mount pulled over plain HTTP from another server. `pull.rs` runs
//! one relay (always-on or on-demand), `client.rs` is its pure request and answer handling,
//! and `master.rs` polls a master's stream list and starts a relay per mount.

pub mod client;
pub mod master;
pub mod pull;

use std::sync::Arc;

use crate::ctx::ServerCtx;

/// Starts every `[[relay]]` and the `[master]` stream-list poller. Called once from
/// `Server::bind`, inside the runtime; everything stops when the server shuts down.
pub fn start_all(ctx: &Arc<ServerCtx>) {
    let mut handles = Vec::new();
    let mut locals: Vec<String> = Vec::new();
    for c in &ctx.config.relay {
        let spec = pull::RelaySpec::from_config(c);
        if locals.contains(&spec.local_mount) {
            tracing::warn!(mount = %spec.local_mount, "relay skipped: another [[relay]] feeds this mount");
            continue;
        }
        locals.push(spec.local_mount.clone());
        tracing::info!(
            mount = %spec.local_mount,
            upstream = %spec.upstream,
            on_demand = spec.on_demand,
            "relay configured"
        );
        handles.push(pull::spawn(ctx.clone(), spec));
    }
    if let Some(m) = &ctx.config.master {
        handles.push(master::spawn(ctx.clone(), m.clone(), locals));
    }
    if handles.is_empty() {
        return;
    }
    // The handles live here until shutdown (dropping one would stop its relay).
    let mut shutdown = ctx.shutdown.clone();
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|v| *v).await;
        for h in handles {
            h.stop().await;
        }
    });
}
