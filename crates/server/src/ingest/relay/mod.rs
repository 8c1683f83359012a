//! Relays (origin → edge): a mount pulled over plain HTTP from another server. `pull.rs` runs
//! one relay (always-on or on-demand), `client.rs` is its pure request and answer handling,
//! and `master.rs` polls a master's stream list and starts a relay per mount. This file holds
//! [`Relays`], the running set, which a reload brings in line with the new configuration.

pub mod client;
pub mod master;
pub mod pull;

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, MasterConfig, RelayConfig};
use crate::ctx::ServerCtx;

/// The running `[[relay]]` relays and `[master]` poller, by the configuration that started
/// them. Started from `Server::bind`; a reload hands it the new configuration
/// ([`Relays::apply`]); dropping it (server shutdown) stops them all.
#[derive(Debug, Default)]
pub struct Relays {
    running: Vec<(RelayConfig, pull::RelayHandle)>,
    master: Option<(MasterConfig, Vec<String>, pull::RelayHandle)>,
}

impl Relays {
    /// Makes the running relays those of `config`: relays whose `[[relay]]` entry is gone or
    /// changed stop, new and changed ones start, unchanged ones keep running untouched; the
    /// `[master]` poller restarts when its section or the static relays' mounts changed.
    /// Returns one line per change, for the reload's summary. A second `[[relay]]` for a local
    /// mount already relayed is skipped with a warning.
    pub async fn apply(&mut self, ctx: &Arc<ServerCtx>, config: &Config) -> Vec<String> {
        let mut changes = Vec::new();
        let mut wanted: Vec<&RelayConfig> = Vec::new();
        for c in &config.relay {
            if wanted.iter().any(|w| w.local() == c.local()) {
                tracing::warn!(mount = %c.local(), "relay skipped: another [[relay]] feeds this mount");
                continue;
            }
            wanted.push(c);
        }
        let (keep, stop): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|(c, _)| wanted.contains(&c));
        let stopped: Vec<String> = stop.iter().map(|(c, _)| c.local().to_owned()).collect();
        for (c, h) in stop {
            h.stop().await;
            if !wanted.iter().any(|w| w.local() == c.local()) {
                tracing::info!(mount = %c.local(), "relay removed from the configuration: stopped");
                changes.push(format!("relay {} stopped", c.local()));
            }
        }
        self.running = keep;
        for c in wanted {
            if self.running.iter().any(|(r, _)| r == c) {
                continue;
            }
            let spec = pull::RelaySpec::from_config(c);
            tracing::info!(
                mount = %spec.local_mount,
                upstream = %spec.upstream,
                on_demand = spec.on_demand,
                "relay configured"
            );
            let what = if stopped.iter().any(|s| s == c.local()) {
                "restarted"
            } else {
                "started"
            };
            changes.push(format!("relay {} {what}", c.local()));
            self.running
                .push((c.clone(), pull::spawn(ctx.clone(), spec)));
        }
        let locals: Vec<String> = self
            .running
            .iter()
            .map(|(c, _)| c.local().to_owned())
            .collect();
        let same_master = match (&self.master, &config.master) {
            (Some((m, l, _)), Some(n)) => m == n && *l == locals,
            (None, None) => true,
            _ => false,
        };
        if !same_master {
            if let Some((_, _, h)) = self.master.take() {
                h.stop().await;
                changes.push("master poller stopped".into());
            }
            if let Some(m) = &config.master {
                let h = master::spawn(ctx.clone(), m.clone(), locals.clone());
                self.master = Some((m.clone(), locals, h));
                changes.push(format!("master poller started ({}:{})", m.server, m.port));
            }
        }
        changes
    }

    /// Stops every relay and the master poller, waiting at most `limit` for them.
    pub async fn stop_all(self, limit: Duration) {
        let all = self
            .running
            .into_iter()
            .map(|(_, h)| h)
            .chain(self.master.map(|(_, _, h)| h));
        let _ = tokio::time::timeout(limit, async {
            for h in all {
                h.stop().await;
            }
        })
        .await;
    }
}
