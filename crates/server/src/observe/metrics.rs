//! Prometheus metrics (`/metrics`, text exposition format) through `prometheus-client`.
//!
//! Per-mount series carry a `mount` label. Hot-path counters (bytes sent) are accumulated by
//! each fan-out shard and added here once per tick, never per write.
//!
//! [`Metrics::encode_view`] renders the exposition for one audience: the caller says of each
//! mount found in the series whether to show it, hide it (hidden mounts in the public output)
//! or forget it (a mount that has ended: its series are removed with `Family::remove` once no
//! listener is counted on it any more, so per-show mounts do not grow the output forever).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The labels of `throng_session_ends_total`: the audience path (`icy`, `hls`, `whep`,
/// `events`) and the end reason's key (`client:hung-up`, `policy:too-slow`, ...: the
/// vocabulary of `audience::EndReason`, shared with the access log and the status documents).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndLabel {
    /// `icy`, `hls`, `whep` or `events`.
    pub path: &'static str,
    /// The end reason's `side:why` key.
    pub reason: &'static str,
}

/// The labels of `throng_hls_requests_total`: the mount name (escaped as [`MountLabel`]) and
/// what was asked for (`playlist`: a multivariant or media playlist; `segment`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HlsRequestLabel {
    /// Mount name, escaped as in [`MountLabel`].
    pub mount: String,
    /// `playlist` or `segment`.
    pub kind: &'static str,
}

impl HlsRequestLabel {
    /// The label for a request of `kind` on mount name `mount`.
    pub fn new(mount: &str, kind: &'static str) -> HlsRequestLabel {
        HlsRequestLabel {
            mount: escape_label(mount),
            kind,
        }
    }
}

/// The `mount` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MountLabel {
    /// Mount name, escaped for the text exposition (`\`, `"` and newline as `\\`, `\"`, `\n`;
    /// prometheus-client writes label values as they are).
    pub mount: String,
}

impl MountLabel {
    /// The label for `mount`.
    pub fn new(mount: &str) -> MountLabel {
        MountLabel {
            mount: escape_label(mount),
        }
    }
}

/// `value` escaped as an OpenMetrics label value.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The escaped `mount` label value of an exposition line, if it has one.
fn mount_of_line(line: &str) -> Option<&str> {
    let start = line.find("{mount=\"")? + "{mount=\"".len();
    let rest = &line[start..];
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

/// The inverse of [`escape_label`].
fn unescape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(c) => out.push(c),
            None => out.push('\\'),
        }
    }
    out
}

/// What [`Metrics::encode_view`] does with the series of one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountView {
    /// Written out.
    Show,
    /// Left out of this output (a hidden mount in the public output).
    Hide,
    /// The mount has ended: its series are removed when it has no listener left (left out of
    /// this output either way).
    Forget,
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
    /// `throng_relays`: live mounts fed by a relay, set at each scrape (by `/metrics`).
    pub relays: Gauge,
    /// `throng_event_subscribers`: `/api/v1/events` subscribers connected now.
    pub event_subscribers: Gauge,
    /// `throng_events_sent_total`: events written to subscribers (one per event per
    /// subscriber).
    pub events_sent: Counter,
    /// `throng_event_subscribers_dropped_total`: subscribers dropped for not keeping up.
    pub event_subscribers_dropped: Counter,
    /// `throng_whep_degraded_viewers{mount}`: WebRTC (WHEP) viewers whose RTCP receiver
    /// reports show over 1 % loss, or that sent none for 5 s.
    pub whep_degraded: Family<MountLabel, Gauge>,
    /// `throng_whep_transcoders`: MP3 and AAC mounts transcoded to Opus for their WebRTC
    /// viewers now (one per mount with viewers, `transcode/`).
    pub whep_transcoders: Gauge,
    /// `throng_whep_transcode_skipped_total`: source packets the transcoders' decoders refused
    /// (each replaced by silence) and times a demuxer lost its footing and was opened again.
    pub whep_transcode_skipped: Counter,
    /// `throng_session_ends_total{path,reason}`: audience sessions ended, by path and by end
    /// reason ([`EndLabel`]).
    pub session_ends: Family<EndLabel, Counter>,
    /// `throng_hls_requests_total{mount,kind}`: HLS requests Throng answered itself (what a
    /// cache in front did not), `kind` `playlist` or `segment` ([`HlsRequestLabel`]).
    pub hls_requests: Family<HlsRequestLabel, Counter>,
    /// `throng_hls_bytes_total{mount,kind}`: body bytes of the HLS responses Throng sent
    /// itself (media playlists and segments; what a cache in front fetched), as
    /// `throng_hls_requests_total` counts them.
    pub hls_bytes: Family<HlsRequestLabel, Counter>,
    /// `throng_hls_cache_log_lines_total{outcome}`: lines of the cache tier's request logs
    /// received (`touched`: a session's request; `opened`: a segment of an issued token not
    /// in the table; `ignored`: not an HLS session request, a token Throng did not issue, or
    /// refused a slot; `invalid`: unreadable; `refused`: a datagram from a sender not in
    /// `[hls] cache-log-from`, `hls::cache_log::LineOutcome`).
    pub hls_cache_log_lines: Family<OutcomeLabel, Counter>,
    /// `throng_hls_sessions_refused_total{outcome}`: new HLS sessions refused by
    /// `hls/admission.rs` (`rate`, `per-address`, `full`).
    pub hls_sessions_refused: Family<OutcomeLabel, Counter>,
    /// `throng_hooks_dropped_total`: event hooks not run because `[hooks] max-concurrent`
    /// hooks were running and `[hooks] queue` more were waiting (`hooks/`).
    pub hooks_dropped: Counter,
    /// `throng_ledger_seconds_since_commit`: seconds since the audience ledger's last commit
    /// (set at each scrape; registered with the ledger's own series by
    /// [`Metrics::register_ledger`]).
    pub ledger_seconds_since_commit: Gauge<f64, std::sync::atomic::AtomicU64>,
}

/// The `outcome` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// What became of the thing counted.
    pub outcome: &'static str,
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
            relays: Gauge::default(),
            event_subscribers: Gauge::default(),
            events_sent: Counter::default(),
            event_subscribers_dropped: Counter::default(),
            whep_degraded: Family::default(),
            whep_transcoders: Gauge::default(),
            whep_transcode_skipped: Counter::default(),
            session_ends: Family::default(),
            hls_requests: Family::default(),
            hls_bytes: Family::default(),
            hls_cache_log_lines: Family::default(),
            hls_sessions_refused: Family::default(),
            hooks_dropped: Counter::default(),
            ledger_seconds_since_commit: Gauge::default(),
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
        registry.register(
            "throng_event_subscribers",
            "Event stream subscribers connected now",
            m.event_subscribers.clone(),
        );
        registry.register(
            "throng_events_sent",
            "Events written to event stream subscribers",
            m.events_sent.clone(),
        );
        registry.register(
            "throng_hooks_dropped",
            "Event hooks dropped: max-concurrent running and queue waiting",
            m.hooks_dropped.clone(),
        );
        registry.register(
            "throng_event_subscribers_dropped",
            "Event stream subscribers dropped for not keeping up",
            m.event_subscribers_dropped.clone(),
        );
        registry.register(
            "throng_relays",
            "Live mounts fed by a relay",
            m.relays.clone(),
        );
        registry.register(
            "throng_whep_degraded_viewers",
            "WebRTC viewers with over 1 % loss or no receiver report for 5 s",
            m.whep_degraded.clone(),
        );
        registry.register(
            "throng_whep_transcoders",
            "MP3 and AAC mounts transcoded to Opus for WebRTC viewers now",
            m.whep_transcoders.clone(),
        );
        registry.register(
            "throng_whep_transcode_skipped",
            "Source packets the WebRTC transcoders' decoders refused, and demuxer restarts",
            m.whep_transcode_skipped.clone(),
        );
        registry.register(
            "throng_session_ends",
            "Audience sessions ended, by path and end reason (side:why)",
            m.session_ends.clone(),
        );
        registry.register(
            "throng_hls_requests",
            "HLS requests answered by Throng (not by a cache in front), by mount and kind",
            m.hls_requests.clone(),
        );
        registry.register(
            "throng_hls_bytes",
            "Body bytes of the HLS responses Throng sent itself, by mount and kind",
            m.hls_bytes.clone(),
        );
        registry.register(
            "throng_hls_cache_log_lines",
            "Lines of the cache tier's HLS request logs received, by outcome",
            m.hls_cache_log_lines.clone(),
        );
        registry.register(
            "throng_hls_sessions_refused",
            "New HLS sessions refused (rate, pending per address, table full), by outcome",
            m.hls_sessions_refused.clone(),
        );
        // `process_*`: CPU, memory and descriptors of this process (`process.rs`).
        registry.register_collector(Box::new(crate::observe::process::ProcessCollector));
        Metrics { registry, ..m }
    }

    /// Registers the audience ledger's series (a server with a ledger): `pending`
    /// (`throng_ledger_pending_sessions`: session starts and ends not yet committed),
    /// `failures` (`throng_ledger_write_failures_total`: commits that failed, their batches
    /// kept and tried again) and `throng_ledger_seconds_since_commit`.
    pub fn register_ledger(&mut self, pending: Gauge, failures: Counter) {
        self.registry.register(
            "throng_ledger_pending_sessions",
            "Session starts and ends sent to the audience ledger and not committed yet",
            pending,
        );
        self.registry.register(
            "throng_ledger_write_failures",
            "Audience ledger commits that failed (the batch is kept and tried again)",
            failures,
        );
        self.registry.register(
            "throng_ledger_seconds_since_commit",
            "Seconds since the audience ledger's last commit",
            self.ledger_seconds_since_commit.clone(),
        );
    }

    /// Counts one audience session on `path` (`icy`, `hls`, `whep`, `events`) ended for the
    /// reason `key` (`audience::EndReason::key`).
    pub fn count_end(&self, path: &'static str, reason: &'static str) {
        self.session_ends
            .get_or_create(&EndLabel { path, reason })
            .inc();
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Removes every series of mount `name` if no listener is counted on it (the gauge is
    /// absent or zero); returns whether they were removed. Called when a mount ends, and
    /// again by [`Metrics::encode_view`] for an ended mount whose last listeners have left
    /// since.
    pub fn forget_mount(&self, name: &str) -> bool {
        self.forget_label(&MountLabel::new(name))
    }

    fn forget_label(&self, label: &MountLabel) -> bool {
        if self.listeners.get(label).is_some_and(|g| g.get() != 0) {
            return false;
        }
        self.listeners.remove(label);
        self.connects.remove(label);
        self.disconnects.remove(label);
        self.bytes_sent.remove(label);
        self.slow_listeners.remove(label);
        self.source_bytes.remove(label);
        self.whep_degraded.remove(label);
        true
    }

    /// The text exposition with the series of each mount as `view` says (called once per
    /// mount found in the series, with its name); [`MountView::Forget`] also removes the
    /// series of a mount with no listener left ([`Metrics::forget_mount`]).
    pub fn encode_view(&self, view: impl Fn(&str) -> MountView) -> String {
        let text = self.encode();
        let mut decided: std::collections::HashMap<&str, MountView> = Default::default();
        for line in text.lines() {
            if let Some(m) = mount_of_line(line) {
                decided.entry(m).or_insert_with(|| view(&unescape_label(m)));
            }
        }
        for (m, v) in &decided {
            if *v == MountView::Forget {
                self.forget_label(&MountLabel {
                    mount: (*m).to_owned(),
                });
            }
        }
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            let shown =
                mount_of_line(line).is_none_or(|m| decided.get(m) == Some(&MountView::Show));
            if shown {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_found_again() {
        let name = "/a \"quoted\" \\ name";
        let l = MountLabel::new(name);
        assert_eq!(l.mount, "/a \\\"quoted\\\" \\\\ name");
        let line = format!("throng_listeners{{mount=\"{}\"}} 3", l.mount);
        assert_eq!(mount_of_line(&line), Some(l.mount.as_str()));
        assert_eq!(unescape_label(&l.mount), name);
        assert_eq!(mount_of_line("throng_clients 3"), None);
    }

    #[test]
    fn views_hide_show_and_forget_mounts() {
        let m = Metrics::new();
        for name in ["/public.mp3", "/hidden.mp3", "/ended.mp3", "/draining.mp3"] {
            m.connects.get_or_create(&MountLabel::new(name)).inc();
            m.listeners.get_or_create(&MountLabel::new(name)).set(0);
        }
        m.listeners
            .get_or_create(&MountLabel::new("/draining.mp3"))
            .inc();
        let view = |n: &str| match n {
            "/public.mp3" => MountView::Show,
            "/hidden.mp3" => MountView::Hide,
            _ => MountView::Forget,
        };
        let out = m.encode_view(view);
        assert!(out.contains("mount=\"/public.mp3\""), "{out}");
        for gone in ["/hidden.mp3", "/ended.mp3", "/draining.mp3"] {
            assert!(!out.contains(gone), "{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
        // Hidden series stay, ended ones are removed unless listeners are still counted.
        let all = m.encode();
        assert!(
            all.contains("/hidden.mp3") && !all.contains("/ended.mp3"),
            "{all}"
        );
        assert!(all.contains("/draining.mp3"), "{all}");
        m.listeners
            .get_or_create(&MountLabel::new("/draining.mp3"))
            .dec();
        m.encode_view(view);
        assert!(!m.encode().contains("/draining.mp3"));
        assert!(m.forget_mount("/public.mp3"));
        assert!(!m.encode().contains("/public.mp3"));
    }
}
