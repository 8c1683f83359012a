//! The registry of live mounts, by name, and the fallback rules between mount names (Icecast
//! 2.4.4 `source_find_mount`): fallback chains, run-time overrides (admin `fallbacks`) and
//! on-demand mounts started by their first listener.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use throng_proto::format::Format;

use crate::mount::handover::AdoptedRelay;
use crate::mount::live::{Mount, SourceKind};

/// Why a mount could not be registered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReserveError {
    /// Another source already feeds this mount (Icecast 2.4.4: 403 "Mountpoint in use").
    #[error("mountpoint in use")]
    InUse,
    /// The `sources` limit is reached (Icecast 2.4.4: 403 "too many sources connected").
    #[error("too many sources connected")]
    TooManySources,
}

/// Where the listeners of an ended mount go (see [`Registry::fallback_target`]).
#[derive(Debug, Clone)]
pub enum Fallback {
    /// This live mount.
    Live(Arc<Mount>),
    /// An on-demand relay along the chain was asked to start: keep the listeners a while.
    Starting,
    /// Nowhere: the listeners are closed once they have drained the mount.
    Nothing,
}

/// Most fallback hops followed, as Icecast 2.4.4 `source_find_mount` (10).
pub const MAX_FALLBACK_HOPS: usize = 10;

/// The live mounts, by name, and the fallback rules between mount names.
#[derive(Debug, Default)]
pub struct Registry {
    mounts: RwLock<HashMap<String, Arc<Mount>>>,
    config: arc_swap::ArcSwap<crate::config::Config>,
    /// Fallbacks set at run time (admin `fallbacks`), over the configuration's.
    fallback_overrides: RwLock<HashMap<String, String>>,
    /// Mounts started on demand (on-demand relays), woken by the first listener.
    on_demand: RwLock<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Relays carried across a binary upgrade, until their relay task claims them.
    adopted_relays: parking_lot::Mutex<HashMap<String, AdoptedRelay>>,
    /// The audience ledger mounts send their title changes to.
    ledger: std::sync::OnceLock<crate::ledger::Ledger>,
}

impl Registry {
    /// An empty registry taking fallback rules from `config`.
    pub fn new(config: Arc<crate::config::Config>) -> Registry {
        Registry {
            config: config.into(),
            ..Registry::default()
        }
    }

    /// Takes fallback rules from `config` from now on (a reload); run-time overrides stay.
    pub fn set_config(&self, config: Arc<crate::config::Config>) {
        self.config.store(config);
    }

    /// Sends the title changes of every mount registered from now on to `ledger`'s play log
    /// (set once, at start).
    pub fn set_ledger(&self, ledger: crate::ledger::Ledger) {
        let _ = self.ledger.set(ledger);
    }

    /// The configuration in force (as last given to [`Registry::set_config`]).
    pub fn config(&self) -> Arc<crate::config::Config> {
        self.config.load_full()
    }

    /// Keeps a relay carried across a binary upgrade until the relay task of its mount claims
    /// it ([`Registry::claim_adopted_relay`]).
    pub fn adopt_relay(&self, relay: AdoptedRelay) {
        self.adopted_relays
            .lock()
            .insert(relay.mount.name.clone(), relay);
    }

    /// The relay carried across an upgrade for mount `name`, if any (taken once).
    pub fn claim_adopted_relay(&self, name: &str) -> Option<AdoptedRelay> {
        self.adopted_relays.lock().remove(name)
    }

    /// Whether a relay carried across an upgrade waits for mount `name`.
    pub fn has_adopted_relay(&self, name: &str) -> bool {
        self.adopted_relays.lock().contains_key(name)
    }

    /// Drops the adopted relays no relay task claimed (the new configuration has no such
    /// relay): their connections close and their mounts end, so listeners go to a fallback.
    pub fn drop_unclaimed_relays(&self) -> Vec<String> {
        let unclaimed: Vec<AdoptedRelay> =
            self.adopted_relays.lock().drain().map(|(_, r)| r).collect();
        unclaimed
            .into_iter()
            .map(|r| r.mount.name.clone())
            .collect()
    }

    /// Declares `name` an on-demand mount; the returned `Notify` is signalled each time a
    /// listener asks for it while it is not live.
    pub fn register_on_demand(&self, name: &str) -> Arc<tokio::sync::Notify> {
        self.on_demand
            .write()
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// Forgets the on-demand mount `name`.
    pub fn unregister_on_demand(&self, name: &str) {
        self.on_demand.write().remove(name);
    }

    /// Names of the declared on-demand mounts.
    pub fn on_demand_mounts(&self) -> Vec<String> {
        let mut v: Vec<String> = self.on_demand.read().keys().cloned().collect();
        v.sort();
        v
    }

    /// Asks the on-demand mount `name` to start; false if `name` is not one.
    pub fn request_on_demand(&self, name: &str) -> bool {
        match self.on_demand.read().get(name) {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }

    /// The fallback of mount `name`: set by admin `fallbacks`, else `[[mount]] fallback-mount`.
    pub fn fallback_of(&self, name: &str) -> Option<String> {
        if let Some(f) = self.fallback_overrides.read().get(name) {
            return (!f.is_empty()).then(|| f.clone());
        }
        self.config.load().fallback_for(name).map(str::to_owned)
    }

    /// Sets (or with `""` clears) the fallback of mount `name` at run time (admin `fallbacks`).
    pub fn set_fallback(&self, name: &str, fallback: &str) {
        self.fallback_overrides
            .write()
            .insert(name.to_owned(), fallback.to_owned());
    }

    /// The mount serving a listener who asks for `name`: the live mount `name`, else the first
    /// live mount along its fallback chain (at most [`MAX_FALLBACK_HOPS`]), as Icecast 2.4.4
    /// `source_find_mount`.
    pub fn resolve(&self, name: &str) -> Option<Arc<Mount>> {
        if let Some(m) = self.get(name).filter(|m| !m.queue.load().ended) {
            return Some(m);
        }
        self.follow_fallbacks(name, None)
    }

    /// The first live mount along the fallback chain after `name` (not `name` itself) whose
    /// format is `format` when given.
    pub fn follow_fallbacks(&self, name: &str, format: Option<Format>) -> Option<Arc<Mount>> {
        self.live_fallbacks(name, format).into_iter().next()
    }

    /// Every live mount along the fallback chain after `name`, in order (at most
    /// [`MAX_FALLBACK_HOPS`] hops), whose format is `format` when given.
    pub fn live_fallbacks(&self, name: &str, format: Option<Format>) -> Vec<Arc<Mount>> {
        let mut found = Vec::new();
        let mut at = name.to_owned();
        for _ in 0..MAX_FALLBACK_HOPS {
            let Some(next) = self.fallback_of(&at) else {
                break;
            };
            if next == name {
                break;
            }
            if let Some(m) = self.get(&next) {
                if !m.queue.load().ended && format.is_none_or(|f| f == m.settings.format) {
                    found.push(m);
                }
            }
            at = next;
        }
        found
    }

    /// Where listeners of `mount` go when its feed ends: the first live fallback of the same
    /// format (Icecast moves clients only between mounts of one format); else, when the chain
    /// holds an idle on-demand relay, that relay is asked to start ([`Fallback::Starting`]).
    pub fn fallback_target(&self, mount: &Mount) -> Fallback {
        if let Some(m) = self
            .follow_fallbacks(&mount.name, Some(mount.settings.format))
            .filter(|m| m.id != mount.id)
        {
            return Fallback::Live(m);
        }
        if self.start_on_demand_fallback(&mount.name) {
            Fallback::Starting
        } else {
            Fallback::Nothing
        }
    }

    /// The mount names along the fallback chain after `name` (at most [`MAX_FALLBACK_HOPS`]),
    /// live or not.
    pub fn fallback_chain(&self, name: &str) -> Vec<String> {
        let mut chain = Vec::new();
        let mut at = name.to_owned();
        while chain.len() < MAX_FALLBACK_HOPS {
            match self.fallback_of(&at) {
                Some(next) if next != name && !chain.contains(&next) => {
                    chain.push(next.clone());
                    at = next;
                }
                _ => break,
            }
        }
        chain
    }

    /// Asks the first on-demand mount along the fallback chain of `name` to start, as Icecast
    /// 2.4.4 starts an on-demand relay that a listener is sent to; false if there is none.
    pub fn start_on_demand_fallback(&self, name: &str) -> bool {
        self.fallback_chain(name)
            .iter()
            .any(|n| self.get(n).is_none() && self.request_on_demand(n))
    }

    /// Registers `mount` unless its name is taken or `max_sources` client-fed mounts are live.
    ///
    /// Errors: [`ReserveError::InUse`] when a mount of that name is registered,
    /// [`ReserveError::TooManySources`] when `mount` is client-fed and `max_sources` client-fed
    /// mounts are registered.
    pub fn reserve(&self, mount: Arc<Mount>, max_sources: usize) -> Result<(), ReserveError> {
        let mut map = self.mounts.write();
        if map.contains_key(&mount.name) {
            return Err(ReserveError::InUse);
        }
        let clients = map
            .values()
            .filter(|m| m.settings.kind == SourceKind::Client)
            .count();
        if mount.settings.kind == SourceKind::Client && clients >= max_sources {
            return Err(ReserveError::TooManySources);
        }
        if let Some(ledger) = self.ledger.get() {
            let _ = mount.ledger.set(ledger.clone());
        }
        map.insert(mount.name.clone(), mount);
        Ok(())
    }

    /// Unregisters the mount `name` if it is still incarnation `id`.
    pub fn remove(&self, name: &str, id: u64) {
        let mut map = self.mounts.write();
        if map.get(name).is_some_and(|m| m.id == id) {
            map.remove(name);
        }
    }

    /// The live mount `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Mount>> {
        self.mounts.read().get(name).cloned()
    }

    /// All live mounts, sorted by name.
    pub fn list(&self) -> Vec<Arc<Mount>> {
        let mut v: Vec<Arc<Mount>> = self.mounts.read().values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::live::test_support::test_mount as mount;

    fn registry(toml: &str) -> Registry {
        Registry::new(Arc::new(crate::config::Config::from_toml(toml).unwrap()))
    }

    #[test]
    fn fallback_chains_skip_dead_mounts_and_stop_at_loops() {
        let r = registry(
            "[[mount]]\nname = \"/a\"\nfallback-mount = \"/b\"\n\
             [[mount]]\nname = \"/b\"\nfallback-mount = \"/c\"\n\
             [[mount]]\nname = \"/c\"\nfallback-mount = \"/a\"\n",
        );
        assert!(r.resolve("/a").is_none(), "a loop of dead mounts ends");
        let (c, _wc) = mount("/c", Format::Mp3);
        r.reserve(c.clone(), 16).unwrap();
        assert_eq!(
            r.resolve("/a").unwrap().name,
            "/c",
            "/b is down, /c is live"
        );
        assert!(r.follow_fallbacks("/a", Some(Format::Ogg)).is_none());
        let (b, mut wb) = mount("/b", Format::Mp3);
        r.reserve(b.clone(), 16).unwrap();
        assert_eq!(r.resolve("/a").unwrap().name, "/b");
        // An ended feed is not live, even while still registered.
        wb.end();
        assert_eq!(r.resolve("/a").unwrap().name, "/c");
        assert!(
            matches!(r.fallback_target(&c), Fallback::Nothing),
            "/c → /a is down"
        );
        // Admin `fallbacks` overrides the configuration; "" clears it.
        r.set_fallback("/a", "/c");
        assert_eq!(r.fallback_of("/a").as_deref(), Some("/c"));
        r.set_fallback("/a", "");
        assert!(r.resolve("/a").is_none());
    }
}
