//! The WHEP media engines: WebRTC viewers (ICE-lite, DTLS-SRTP, one Opus audio track, str0m)
//! spread over one engine per fan-out shard, each engine a thread of its own with its own UDP
//! socket (`[webrtc] udp-listen` port for the first, port + 1, ... for the next: the answer's
//! ICE candidate carries its engine's port). A new session goes to the engine with the fewest
//! sessions ([`least_loaded`]); its resource id starts with the engine's index so `DELETE`
//! goes straight to it; `listclients`, `killclient`, the session count and the
//! degraded-viewers gauge ([`shared::DegradedTally`]) are summed over engines.
//!
//! Why a WHEP thread beside each shard rather than the sessions on the shard threads' own mio
//! poll: a shard's loop is timed for cheap coalesced TCP writes (its tick schedule in
//! `fanout/shard/decide.rs`), while a WebRTC session costs a DTLS handshake of several
//! milliseconds of public-key crypto when it starts and an SRTP-sealed datagram every
//! 20 ms after; on the shard threads every handshake would stall the ICY listeners of that
//! shard. As separate threads, one per shard, the kernel interleaves both kinds of work on the
//! cores, and the engines scale with the shard count like the shards do. The engine loop
//! itself (`engine.rs`) wakes only the sessions that are due ([`timers::Timers`]); its
//! decisions are pure code on a `now` passed in: which session a datagram is for
//! ([`routing::Routes`]), when the media and health passes are due, how long to sleep, what a
//! drive does with str0m's timeout and when a session is over ([`schedule`]).

pub mod batch;
pub mod divert;
pub mod engine;
pub mod pages;
pub mod routing;
pub mod schedule;
pub mod shared;
pub mod srtp_keys;
pub mod srtp_send;
pub mod timers;
pub mod unconnected;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::audience::follow::MoveFilter;
use crate::audience::page::{take_page, Page};
use crate::audience::ListenerRow;
use crate::mount::live::Mount;
use crate::mount::registry::Registry;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::Metrics;

pub use shared::{engine_of, Created, EngineShared, NewViewer, WhepError};

/// The index of the engine with the fewest sessions (the first of equals).
///
/// Panics: `loads` is empty.
pub fn least_loaded(loads: &[usize]) -> usize {
    loads
        .iter()
        .enumerate()
        .min_by_key(|(i, n)| (**n, *i))
        .map(|(i, _)| i)
        .expect("at least one engine")
}

/// The UDP address of engine `index`: `listen` with its port + `index` (port 0 stays 0, an
/// ephemeral port for each); `None` past port 65535.
pub fn engine_addr(listen: SocketAddr, index: usize) -> Option<SocketAddr> {
    if listen.port() == 0 {
        return Some(listen);
    }
    let port = u16::try_from(usize::from(listen.port()) + index).ok()?;
    Some(SocketAddr::new(listen.ip(), port))
}

/// Handle to the engine threads.
#[derive(Debug, Clone)]
pub struct WhepEngine {
    engines: Vec<engine::EngineHandle>,
    /// Sessions whose peer has not connected yet, over all engines.
    unconnected: Arc<unconnected::Unconnected>,
    /// Sessions other than viewers sharing the engines' ports (`divert.rs`).
    divert: Arc<divert::Divert>,
}

impl std::fmt::Debug for EngineShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineShared").finish_non_exhaustive()
    }
}

impl WhepEngine {
    /// Starts `count` engines (at least one), engine `i` bound to [`engine_addr`]`(listen,
    /// i)`; `public` replaces the address in the ICE candidates; `transcode_frame_ms` is the
    /// Opus packet duration of transcoded feeds (`[webrtc] transcode-frame-ms`).
    ///
    /// Errors: a socket cannot be bound (the port range is taken or past 65535) or a thread
    /// cannot start.
    pub fn start(
        listen: SocketAddr,
        public: Option<IpAddr>,
        count: usize,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
        access_log: AccessLog,
        transcode_frame_ms: Option<u32>,
    ) -> std::io::Result<WhepEngine> {
        // The crypto backend of the build's str0m feature, aws-lc-rs (a no-op when one is
        // installed already).
        str0m::crypto::from_feature_flags().install_process_default();
        let count = count.clamp(1, 256);
        let shared = EngineShared {
            registry,
            access_log,
            degraded: Arc::default(),
            engines: count,
            transcoders: Arc::new(crate::transcode::Transcoders::new(
                metrics.whep_transcoders.clone(),
                metrics.whep_transcode_skipped.clone(),
                transcode_frame_ms,
            )),
            metrics,
            divert: Arc::default(),
        };
        let engines = (0..count)
            .map(|i| {
                let addr = engine_addr(listen, i).ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("WebRTC engine {i}: port past 65535"),
                    )
                })?;
                engine::EngineHandle::spawn(i, addr, public, shared.clone())
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(WhepEngine {
            divert: shared.divert.clone(),
            engines,
            unconnected: Arc::default(),
        })
    }

    /// The UDP address announced to peers by the first engine.
    pub fn local_addr(&self) -> SocketAddr {
        self.engines[0].local
    }

    /// The diverted sessions' table (WHIP publishers, `divert.rs`).
    pub fn divert(&self) -> &Arc<divert::Divert> {
        &self.divert
    }

    /// The first engine's announced UDP address and a clone of its socket: a diverted
    /// session's ICE candidate and where it sends from.
    pub fn divert_socket(&self) -> (SocketAddr, Arc<std::net::UdpSocket>) {
        (self.engines[0].local, self.engines[0].sender.clone())
    }

    /// The UDP address announced by each engine, in order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.engines.iter().map(|e| e.local).collect()
    }

    /// Open sessions (and sessions being created), over all engines.
    pub fn sessions(&self) -> usize {
        self.engines
            .iter()
            .map(|e| e.load.load(Ordering::Relaxed))
            .sum()
    }

    /// A unit of the budget of sessions not connected yet for an offer from `ip`, whose
    /// address may hold `per_address` of them (`unconnected.rs`).
    ///
    /// Errors: [`unconnected::UnconnectedRefused`] (the offer is answered 503).
    pub fn reserve(
        &self,
        ip: IpAddr,
        per_address: u32,
    ) -> Result<unconnected::UnconnectedUnit, unconnected::UnconnectedRefused> {
        self.unconnected.take(ip, per_address)
    }

    /// Sessions whose peer has not connected yet, over all engines.
    pub fn unconnected(&self) -> usize {
        self.unconnected.len()
    }

    /// Creates a session for `viewer` on the engine with the fewest sessions: returns its id
    /// and SDP answer. On error the listener slot taken on `viewer.mount` is given back.
    pub async fn add(&self, viewer: NewViewer) -> Result<Created, WhepError> {
        let loads: Vec<usize> = self
            .engines
            .iter()
            .map(|e| e.load.load(Ordering::Relaxed))
            .collect();
        self.engines[least_loaded(&loads)].add(viewer).await
    }

    /// Ends session `id`; `false` when there is none.
    pub async fn remove(&self, id: &str) -> bool {
        match engine_of(id).and_then(|i| self.engines.get(i)) {
            Some(e) => e.remove(id).await,
            None => false,
        }
    }

    /// The viewers on `mount` (all when `None`) on `page`, as listener rows sorted by id.
    pub async fn list(&self, mount: Option<&str>, page: Page) -> Vec<ListenerRow> {
        let mut rows = Vec::new();
        for e in &self.engines {
            rows = take_page(rows.into_iter().chain(e.list(mount, page).await), page);
        }
        rows
    }

    /// Closes every session of every engine (access-log lines, close hooks) and stops the
    /// engines; blocking, at most `timeout` per engine. For the server's shutdown.
    pub fn shutdown(&self, timeout: std::time::Duration, why: crate::audience::EndReason) {
        for e in &self.engines {
            e.shutdown(timeout, why);
        }
    }

    /// Disconnects the viewer with listener id `id`; `false` when there is none.
    pub async fn kill(&self, id: u64) -> bool {
        let mut found = false;
        for e in &self.engines {
            found |= e.kill(id).await;
        }
        found
    }

    /// Moves the viewers `filter` takes to `to` (`moveclients`, `fallback-override`), each at
    /// its next media pass; how many.
    pub async fn move_viewers(&self, filter: MoveFilter, to: Arc<Mount>) -> usize {
        let mut n = 0;
        for e in &self.engines {
            n += e.move_viewers(filter.clone(), to.clone()).await;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn new_sessions_go_to_the_engine_with_fewest() {
        assert_eq!(least_loaded(&[0]), 0);
        assert_eq!(least_loaded(&[3, 1, 2]), 1);
        assert_eq!(least_loaded(&[2, 1, 1]), 1, "the first of equals");
        // Filling two engines alternates.
        let mut loads = [0usize; 2];
        for _ in 0..10 {
            let i = least_loaded(&loads);
            loads[i] += 1;
        }
        assert_eq!(loads, [5, 5]);
    }

    #[test]
    fn engines_take_consecutive_ports() {
        let a: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        assert_eq!(engine_addr(a, 0), Some(a));
        assert_eq!(engine_addr(a, 2), "0.0.0.0:8445".parse().ok());
        let zero: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(engine_addr(zero, 3), Some(zero));
        let top: SocketAddr = "127.0.0.1:65535".parse().unwrap();
        assert_eq!(engine_addr(top, 1), None);
    }
}
