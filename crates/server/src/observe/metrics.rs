//! Prometheus metrics (`/metrics`, text exposition format) through `prometheus-client`.
//!
//! Per-mount series carry a `mount` label. Hot-path counters (bytes sent) are accumulated by
//! each fan-out shard and added here once per tick, never per write.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `mount` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MountLabel {
    /// Mount name.
    pub mount: String,
}

impl MountLabel {
    /// The label for `mount`.
    pub fn new(mount: &str) -> MountLabel {
        MountLabel {
            mount: mount.to_owned(),
        }
    }
}

/// Every metric Throng exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `throng_listeners{mount}`: listeners connected now.
    pub listeners: Family<MountLabel, Gauge>,
    /// `throng_listener_connects_total{mount}`.
    pub connects: Family<MountLabel, Counter>,
    /// `throng_listener_disconnects_total{mount}`.
    pub disconnects: Family<MountLabel, Counter>,
    /// `throng_bytes_sent_total{mount}`: bytes written to listeners (heads included).
    pub bytes_sent: Family<MountLabel, Counter>,
    /// `throng_slow_listeners_total{mount}`: listeners dropped or skipped for lagging more
    /// than queue-size.
    pub slow_listeners: Family<MountLabel, Counter>,
    /// `throng_source_bytes_received_total{mount}`: audio bytes received from sources.
    pub source_bytes: Family<MountLabel, Counter>,
    /// `throng_sources`: live mounts fed by source clients or files.
    pub sources: Gauge,
    /// `throng_source_connects_total`: accepted source clients.
    pub source_connects: Counter,
    /// `throng_clients`: open connections of any kind.
    pub clients: Gauge,
    /// `throng_requests_rejected_total`: requests answered with an HTTP error.
    pub rejected: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            listeners: Family::default(),
            connects: Family::default(),
            disconnects: Family::default(),
            bytes_sent: Family::default(),
            slow_listeners: Family::default(),
            source_bytes: Family::default(),
            sources: Gauge::default(),
            source_connects: Counter::default(),
            clients: Gauge::default(),
            rejected: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "throng_listeners",
            "Listeners connected now",
            m.listeners.clone(),
        );
        registry.register(
            "throng_listener_connects",
            "Listeners accepted",
            m.connects.clone(),
        );
        registry.register(
            "throng_listener_disconnects",
            "Listeners that left or were dropped",
            m.disconnects.clone(),
        );
        registry.register(
            "throng_bytes_sent",
            "Bytes written to listeners",
            m.bytes_sent.clone(),
        );
        registry.register(
            "throng_slow_listeners",
            "Listeners that lagged more than queue-size",
            m.slow_listeners.clone(),
        );
        registry.register(
            "throng_source_bytes_received",
            "Audio bytes received from sources",
            m.source_bytes.clone(),
        );
        registry.register("throng_sources", "Live mounts", m.sources.clone());
        registry.register(
            "throng_source_connects",
            "Source clients accepted",
            m.source_connects.clone(),
        );
        registry.register("throng_clients", "Open connections", m.clients.clone());
        registry.register(
            "throng_requests_rejected",
            "Requests answered with an HTTP error",
            m.rejected.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
