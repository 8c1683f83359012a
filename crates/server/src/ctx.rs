//! The handles shared by every task of a running server ([`ServerCtx`]): configuration, mount
//! registry, fan-out shards, metrics, access log, authenticators, filters and the shutdown
//! signal. It holds handles only; the decisions live in the layers below (config readers on
//! [`Config`], the intro cache in `mount/intro.rs`, the `clients` count in `net/clients.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    /// The configuration, passwords filled in.
    pub config: Arc<Config>,
    /// Live mounts and fallback rules.
    pub registry: Arc<Registry>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Access log.
    pub access_log: AccessLog,
    /// The fan-out shards.
    pub fanout: FanOut,
    /// Open connections of any kind, against the `clients` limit.
    pub clients: Arc<Clients>,
    /// When the server started.
    pub started: chrono::DateTime<chrono::Local>,
    /// Port used in `listenurl` (the first listen address's).
    pub port: u16,
    /// Becomes true when the server shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// Listener and source authenticators of the `[[mount]]` entries.
    pub auth: Authenticators,
    /// Trusted proxies and the deny/allow files (`[paths]`).
    pub filters: Filters,
    /// Intro files, read once and shared.
    pub intros: IntroCache,
    /// Source of [`ServerCtx::next_id`].
    pub(crate) next_id: AtomicU64,
}

impl ServerCtx {
    /// A fresh id for a client.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}
