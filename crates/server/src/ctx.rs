//! The handles shared by every task of a running server ([`ServerCtx`]): configuration, mount
//! registry, fan-out shards, metrics, access log, authenticators, filters and the shutdown
//! signal. It holds handles only; the decisions live in the layers below (config readers on
//! [`Config`], the intro cache in `mount/intro.rs`, the `clients` count in `net/clients.rs`).
//!
//! The configuration, the authenticators and the filters are swapped whole by a reload
//! (`reload.rs`), so each is read through an accessor ([`ServerCtx::config`],
//! [`ServerCtx::auth`], [`ServerCtx::filters`]) that returns the version in force: a task that
//! holds one keeps a consistent view while a reload installs the next.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use tokio::sync::watch;

use crate::auth::Authenticators;
use crate::config::Config;
use crate::control::ControlHandle;
use crate::fanout::FanOut;
use crate::mount::intro::IntroCache;
use crate::mount::registry::Registry;
use crate::net::clients::Clients;
use crate::net::filters::Filters;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::Metrics;

/// State shared by every task of a running server: handles only.
#[derive(Debug)]
pub struct ServerCtx {
    /// Operator commands to the run loop (admin `reloadconfig` sends a reload here).
    pub control: ControlHandle,
    /// The configuration in force, passwords filled in (see [`ServerCtx::config`]).
    pub(crate) config: ArcSwap<Config>,
    /// Live mounts and fallback rules.
    pub registry: Arc<Registry>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Access log.
    pub access_log: AccessLog,
    /// The fan-out shards.
    pub fanout: FanOut,
    /// The `/api/v1/events` fan-out.
    pub events: crate::fanout::events::EventHub,
    /// The WHEP (WebRTC playback) engine, when `[webrtc] udp-listen` is set.
    pub whep: Option<crate::fanout::whep::WhepEngine>,
    /// Open connections of any kind, against the `clients` limit.
    pub clients: Arc<Clients>,
    /// When the server started.
    pub started: chrono::DateTime<chrono::Local>,
    /// Port used in `listenurl` (the first listen address's).
    pub port: u16,
    /// Becomes true when the server shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// Listener and source authenticators of the `[[mount]]` entries (see
    /// [`ServerCtx::auth`]).
    pub(crate) auth: ArcSwap<Authenticators>,
    /// Trusted proxies and the deny/allow files of `[paths]` (see [`ServerCtx::filters`]).
    pub(crate) filters: ArcSwap<Filters>,
    /// Intro files, read once and shared.
    pub intros: IntroCache,
    /// The edges that report to this server (`cluster/registry.rs`).
    pub cluster: crate::cluster::registry::Cluster,
    /// HLS packagers and sessions (`hls/`).
    pub hls: Arc<crate::hls::Hls>,
    /// Source of [`ServerCtx::next_id`].
    pub(crate) next_id: AtomicU64,
    /// The TLS configuration of the HTTPS sockets; a reload swaps its certificates.
    pub tls: crate::net::tls::TlsAcceptor,
    /// The audience ledger, if the server keeps one (`[ledger]`).
    pub ledger: Option<crate::ledger::Ledger>,
    /// Bumped by each reload and SIGUSR1: every `dump-file` recording starts a new file
    /// (`dump_file.rs`).
    pub new_dump_files: AtomicU64,
    /// WHIP publishes by mount name: their handles, type-erased because `whip/` sits above
    /// this layer (`whip::publish::find` reads them back).
    pub whip_publishers: parking_lot::Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
    /// Whether the server drains (`cluster/drain.rs`): newcomers are sent on, `/healthz/ready`
    /// says false.
    pub drain: crate::cluster::drain::DrainState,
    /// The hook budget (`[hooks]`: how many hooks run and wait at once, `hooks/budget.rs`).
    pub hooks: Arc<crate::hooks::budget::Budget>,
}

impl ServerCtx {
    /// A fresh id for a client.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The configuration in force (a reload swaps it; hold the `Arc` for a consistent view).
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// The authenticators in force, built from [`ServerCtx::config`].
    pub fn auth(&self) -> Arc<Authenticators> {
        self.auth.load_full()
    }

    /// The filters in force, built from [`ServerCtx::config`]'s `[paths]`.
    pub fn filters(&self) -> Arc<Filters> {
        self.filters.load_full()
    }
}
