//! The whole audience of the server, across paths: what an operator command does to every
//! member of a mount's audience, whether an ICY listener on a fan-out shard, an HLS session or
//! a WHEP viewer, so `listclients`, `killclient`, `moveclients` and `fallback-override`'s
//! return work the same on every path (docs/operators.md, "One audience"). Each engine applies
//! the command by the audience follower's rules (`audience::follow`: never across formats, on a
//! frame or page boundary); this file only asks each of them.

use std::sync::Arc;
use std::time::Instant;

use crate::audience::follow::MoveFilter;
use crate::audience::page::{take_page, Page};
use crate::audience::{AudiencePath, EndReason, ListenerRow};
use crate::ctx::ServerCtx;
use crate::mount::live::Mount;

/// The members on mount `mount` (all mounts when `None`), on every path, on `page` (sorted by
/// id; each path keeps only its page, `audience/page.rs`).
pub async fn members(ctx: &ServerCtx, mount: Option<&str>, page: Page) -> Vec<ListenerRow> {
    let icy = ctx.fanout.list(mount, page).await;
    let hls = ctx.hls.sessions.rows_page(mount, Instant::now(), page);
    let mut rows = take_page(icy.into_iter().chain(hls), page);
    if let Some(whep) = &ctx.whep {
        rows = take_page(rows.into_iter().chain(whep.list(mount, page).await), page);
    }
    rows
}

/// Ends member `id` on whichever path serves it (`operator:killed`); whether one was found.
pub async fn kill(ctx: &ServerCtx, id: u64) -> bool {
    ctx.hls.sessions.kill(id, &ctx.metrics, &ctx.access_log)
        || ctx.fanout.kill(id).await
        || match &ctx.whep {
            Some(whep) => whep.kill(id).await,
            None => false,
        }
}

/// How many members a move took, by path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    /// ICY listeners (each switches at its next frame or page boundary).
    pub icy: usize,
    /// HLS sessions (their playlists continue with `to`'s segments after an
    /// `EXT-X-DISCONTINUITY`).
    pub hls: usize,
    /// WHEP viewers (each switches at its next media pass).
    pub whep: usize,
}

impl Moved {
    /// Members moved on every path.
    pub fn total(self) -> usize {
        self.icy + self.hls + self.whep
    }
}

/// Moves every member `filter` takes to mount `to`, on every path (`moveclients`, and
/// `fallback-override` bringing listeners back to their mount).
pub async fn move_members(ctx: &ServerCtx, filter: MoveFilter, to: Arc<Mount>) -> Moved {
    let hls = ctx.hls.move_sessions(&filter, &to, &ctx.metrics);
    let whep = match &ctx.whep {
        Some(whep) => whep.move_viewers(filter.clone(), to.clone()).await,
        None => 0,
    };
    let icy = ctx.fanout.move_listeners(filter, to).await;
    Moved { icy, hls, whep }
}

/// Members connected now on each path: ICY listeners, HLS sessions, WHEP viewers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// ICY listeners on the fan-out shards.
    pub icy: usize,
    /// HLS sessions.
    pub hls: usize,
    /// WHEP viewers.
    pub whep: usize,
}

impl Counts {
    /// Members on every path.
    pub fn total(self) -> usize {
        self.icy + self.hls + self.whep
    }
}

/// Members connected now, by path (the status documents' `listeners`).
pub fn counts(ctx: &ServerCtx) -> Counts {
    Counts {
        icy: ctx.fanout.listeners(),
        hls: ctx.hls.sessions.listeners(),
        whep: ctx.whep.as_ref().map_or(0, |w| w.sessions()),
    }
}

/// The paths whose sessions end with an [`EndReason`], in the order the status documents and
/// the admin UI list them.
pub const ENDING_PATHS: [AudiencePath; 4] = [
    AudiencePath::Icy,
    AudiencePath::Hls,
    AudiencePath::Whep,
    AudiencePath::Events,
];

/// Sessions ended since the start, by path and end reason (`throng_session_ends_total`),
/// every pair listed (zero included), in [`ENDING_PATHS`] and [`EndReason::ALL`] order.
pub fn session_ends(ctx: &ServerCtx) -> Vec<(AudiencePath, EndReason, u64)> {
    let mut out = Vec::with_capacity(ENDING_PATHS.len() * EndReason::ALL.len());
    for path in ENDING_PATHS {
        for why in EndReason::ALL {
            let n = ctx
                .metrics
                .session_ends
                .get_or_create(&crate::observe::metrics::EndLabel {
                    path: path.as_str(),
                    reason: why.key(),
                })
                .get();
            out.push((path, why, n));
        }
    }
    out
}
