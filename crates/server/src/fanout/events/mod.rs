//! `/api/v1/events`: now-playing push to browsers as a fan-out of its own, built like the audio
//! one. One [`EventLog`] per process holds every event encoded once (`log.rs`); a pump thread
//! turns mount changes into events (`pump.rs`, JSON in `json.rs`); event shard threads hold
//! the subscribers as cursors on the log and write each one everything new in one `writev`
//! of shared bytes (`shard.rs`). The request itself is answered in `event_stream.rs`, which
//! builds the first bytes ([`EventHub::first_bytes`]) and hands the socket here.

pub mod json;
pub mod log;
pub mod pump;
pub mod shard;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::fanout::events::log::EventLog;
use crate::fanout::events::pump::{Change, Facts, Tracker};
use crate::fanout::events::shard::{EventShardConfig, EventShardHandle, NewSubscriber};
use crate::mount::live::Mount;
use crate::mount::registry::Registry;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::Metrics;

/// The event fan-out: the log, its pump and the event shards.
#[derive(Debug)]
pub struct EventHub {
    log: Arc<EventLog>,
    shards: Arc<Vec<EventShardHandle>>,
    stop: Arc<AtomicBool>,
    pump: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    port: u16,
    registry: Arc<Registry>,
}

impl EventHub {
    /// Starts `workers` event shards (0: one per available core) and the pump watching
    /// `registry`; `port` is the one in `listenurl`.
    ///
    /// Errors: a thread or poll cannot be created.
    pub fn start(
        workers: usize,
        cfg: EventShardConfig,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
        access_log: AccessLog,
        port: u16,
    ) -> std::io::Result<EventHub> {
        let n = if workers == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            workers
        };
        let log = Arc::new(EventLog::starting_now());
        let shards = Arc::new(
            (0..n)
                .map(|i| {
                    EventShardHandle::spawn(
                        i,
                        cfg,
                        log.clone(),
                        metrics.clone(),
                        access_log.clone(),
                    )
                })
                .collect::<std::io::Result<Vec<_>>>()?,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let pump = {
            let (log, shards, stop, registry) =
                (log.clone(), shards.clone(), stop.clone(), registry.clone());
            std::thread::Builder::new()
                .name("events-pump".into())
                .spawn(move || run_pump(&log, &shards, &stop, &registry, port))?
        };
        Ok(EventHub {
            log,
            shards,
            stop,
            pump: parking_lot::Mutex::new(Some(pump)),
            port,
            registry,
        })
    }

    /// The bytes a new subscriber gets first and the id of the next event it needs: `head`,
    /// `retry:`, then either nothing more (`last_seen` is still in the ring: it gets only the
    /// events after it) or one `mount` event per public mount (of `filter`, if given), each
    /// with the id of the last event published.
    pub fn first_bytes(
        &self,
        head: &[u8],
        filter: Option<&str>,
        last_seen: Option<u64>,
    ) -> (Bytes, u64) {
        let ring = self.log.load();
        let mut out = head.to_vec();
        out.extend_from_slice(throng_proto::sse::RETRY);
        if let Some(next) = last_seen.and_then(|id| ring.resume_after(id)) {
            return (Bytes::from(out), next);
        }
        let base = listen_base(&self.registry, self.port);
        for m in public_mounts(&self.registry) {
            if filter.is_some_and(|f| f != m.name) {
                continue;
            }
            out.extend(throng_proto::sse::frame(
                ring.last,
                "mount",
                &json::mount(&m, &base),
            ));
        }
        (Bytes::from(out), ring.last + 1)
    }

    /// Hands a subscriber to the least-loaded event shard.
    pub fn subscribe(&self, s: NewSubscriber) {
        let shard = self
            .shards
            .iter()
            .min_by_key(|s| s.load())
            .expect("at least one event shard");
        shard.join(Box::new(s));
    }

    /// Whether an event about `mount` is in the ring (the pump has seen it start): a title
    /// set after this is published as a `title` event, not folded into the `mount` event.
    pub fn has_events_of(&self, mount: &str) -> bool {
        self.log.load().events.iter().any(|e| &*e.mount == mount)
    }

    /// Subscribers held by all event shards.
    pub fn subscribers(&self) -> usize {
        self.shards.iter().map(|s| s.load()).sum()
    }

    /// Stops the pump, closes every subscriber and stops the shards.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.pump.lock().take() {
            let _ = t.join();
        }
        for s in self.shards.iter() {
            s.shutdown();
        }
    }
}

/// `http://host:port` of `listenurl`, with the configured hostname.
fn listen_base(registry: &Registry, port: u16) -> String {
    format!("http://{}:{port}", registry.config().hostname)
}

fn public_mounts(registry: &Registry) -> Vec<Arc<Mount>> {
    registry
        .list()
        .into_iter()
        .filter(|m| !m.hidden())
        .collect()
}

/// The pump: every [`pump::POLL`], publishes what changed on the public mounts and wakes the
/// shards if anything was.
fn run_pump(
    log: &EventLog,
    shards: &[EventShardHandle],
    stop: &AtomicBool,
    registry: &Registry,
    port: u16,
) {
    let mut tracker = Tracker::default();
    while !stop.load(Ordering::Relaxed) {
        let mounts = public_mounts(registry);
        let facts: Vec<(&str, Facts)> = mounts
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    Facts {
                        id: m.id,
                        title_gen: m.icy.load().generation,
                        listeners: m.listeners.load(Ordering::Relaxed),
                    },
                )
            })
            .collect();
        let changes = tracker.step(Instant::now(), &facts);
        if !changes.is_empty() {
            let base = listen_base(registry, port);
            let by_id = |id: u64| mounts.iter().find(|m| m.id == id).expect("a listed mount");
            for c in changes {
                match c {
                    Change::Start(id) => {
                        let m = by_id(id);
                        log.publish(&m.name.as_str().into(), "mount", &json::mount(m, &base));
                    }
                    Change::Title(id) => {
                        let m = by_id(id);
                        log.publish(&m.name.as_str().into(), "title", &json::title(m));
                    }
                    Change::Listeners(id, n) => {
                        let m = by_id(id);
                        let name = m.name.as_str();
                        log.publish(&name.into(), "listeners", &json::listeners(name, n));
                    }
                    Change::Stop(name) => {
                        log.publish(
                            &name.as_str().into(),
                            "mount_stop",
                            &json::mount_stop(&name),
                        );
                    }
                }
            }
            for s in shards {
                s.wake();
            }
        }
        std::thread::sleep(pump::POLL);
    }
}
