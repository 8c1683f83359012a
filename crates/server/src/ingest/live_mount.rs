//! Registration of a live mount for as long as its feeder runs ([`LiveMount`]): registry entry,
//! `throng_sources` gauge, URL-auth `mount_add`/`mount_remove` notices, and the
//! `fallback-override` return of listeners. Used by every feeder: source clients, relays and
//! looped files.

use std::sync::Arc;

use crate::ctx::ServerCtx;
use crate::mount::live::{Mount, SourceKind};
use crate::mount::registry::ReserveError;

/// Keeps a mount registered while its feeder runs: dropping it (normal end, error or panic)
/// unregisters the mount, lowers the `throng_sources` gauge and removes the mount's metric
/// series when no listener is left on it, so a mount can never stay "in use" after its feeder
/// is gone.
#[derive(Debug)]
pub struct LiveMount {
    ctx: Arc<ServerCtx>,
    mount: Arc<Mount>,
    /// URL-auth `mount_add` sent; `mount_remove` when dropped (after the registry removal).
    _notice: Option<crate::auth::StreamNotice>,
}

impl LiveMount {
    /// Registers `mount` (see [`crate::mount::registry::Registry::reserve`]) and raises the `throng_sources` gauge.
    ///
    /// Errors: [`ReserveError`] when the name is taken or too many sources are live.
    pub fn reserve(
        ctx: Arc<ServerCtx>,
        mount: Arc<Mount>,
        max_sources: usize,
    ) -> Result<LiveMount, ReserveError> {
        ctx.registry.reserve(mount.clone(), max_sources)?;
        ctx.metrics.sources.inc();
        if ctx
            .config()
            .mount_for(&mount.name)
            .is_some_and(|m| m.fallback_override)
        {
            bring_back_listeners(ctx.clone(), mount.clone());
        }
        // Source clients and relays are streams to Icecast (`source_init`); looped files are not.
        let notice = (mount.settings.kind != SourceKind::File)
            .then(|| ctx.auth().stream_started(&mount.name))
            .flatten();
        Ok(LiveMount {
            ctx,
            mount,
            _notice: notice,
        })
    }
}

/// `fallback-override` (Icecast 2.4.4 `source.c:source_init`): once the returning source has
/// queued its first audio (waiting at most 2 s), every listener that asked for its mount and is
/// now on a fallback is moved back, at a frame boundary, on every path (ICY, HLS, WHEP:
/// `roster.rs`).
fn bring_back_listeners(ctx: Arc<ServerCtx>, mount: Arc<Mount>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    rt.spawn(async move {
        for _ in 0..40 {
            if mount.queue.load().head > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let snapshot = mount.queue.load();
        if snapshot.ended || snapshot.head == 0 {
            return;
        }
        let filter = crate::audience::follow::MoveFilter {
            from: None,
            requested: Some(mount.name.clone()),
        };
        let n = crate::roster::move_members(&ctx, filter, mount.clone())
            .await
            .total();
        if n > 0 {
            tracing::info!(mount = %mount.name, listeners = n, "fallback override: listeners back");
        }
    });
}

impl Drop for LiveMount {
    fn drop(&mut self) {
        self.ctx.registry.remove(&self.mount.name, self.mount.id);
        self.ctx.metrics.sources.dec();
        // Its series go now if no listener is left on it, else at the next `/metrics` scrape
        // after the last one leaves (`Metrics::encode_view`).
        self.ctx.metrics.forget_mount(&self.mount.name);
    }
}
