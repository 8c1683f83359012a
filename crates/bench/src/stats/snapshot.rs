//! The one mergeable summary of a run: what an engine, a worker process, a host (agent) or the
//! whole run knows of one audience group at the end of one second.
//!
//! Every field merges by addition (a histogram by adding its counts, a "first second" by taking
//! the earliest), so the summary of many workers is the sum of theirs and the same type travels
//! from a worker to its process, from a process to an agent and from an agent to the
//! controller, never per-listener data: the cost of merging is flat in listeners.
//!
//! Three kinds of field:
//! - **states** at the end of the second (`want` … `down`): how many listeners are in each;
//! - **running totals** since the start (`connects`, `failures`, the rule counts, media
//!   seconds, bytes, CPU): a second's own traffic is the difference with the second before;
//! - **histograms of the second** ([`Hist`]): the values recorded during that second only; the
//!   run's histogram is the merge of every second's.

use crate::stats::hist::Hist;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Listeners a rule caught, and when it first did (one listener counts once per rule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCount {
    /// Listeners the rule caught at least once (listeners).
    pub listeners: u32,
    /// The first second of the run (since its common start) the rule caught a listener.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_s: Option<u32>,
}

impl RuleCount {
    /// Counts one more listener caught in second `second`.
    pub fn catch(&mut self, second: u32) {
        self.listeners += 1;
        self.first_s = Some(self.first_s.map_or(second, |f| f.min(second)));
    }

    /// Adds another count (listeners summed, the earlier first second).
    pub fn merge(&mut self, o: &RuleCount) {
        self.listeners += o.listeners;
        self.first_s = match (self.first_s, o.first_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The judging rules a listener can fail, each counted on its own (see the crate's
/// [`crate::profile::Judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// `starved: rate`: media seconds below `min-rate` of wall time over the window.
    Rate,
    /// `starved: gap`: a gap between arrivals over the player's buffer (`max-gap`).
    Gap,
    /// `starved: loss`: WebRTC packets lost over `max-loss` in a window (RTP sequence gaps).
    Loss,
    /// `corrupt`: frames or pages that do not chain, a broken ICY metadata block, an HLS segment
    /// out of sequence, an RTP timestamp that goes back.
    Corrupt,
}

impl Rule {
    /// Every rule, in report order.
    pub const ALL: [Rule; 4] = [Rule::Rate, Rule::Gap, Rule::Loss, Rule::Corrupt];

    /// The rule's name as reports and FAIL lines print it (`starved: rate`, `corrupt`).
    pub fn label(self) -> &'static str {
        match self {
            Rule::Rate => "starved: rate",
            Rule::Gap => "starved: gap",
            Rule::Loss => "starved: loss",
            Rule::Corrupt => "corrupt",
        }
    }

    /// The rule's key in metrics and JSON (`rate`, `gap`, `loss`, `corrupt`).
    pub fn key(self) -> &'static str {
        match self {
            Rule::Rate => "rate",
            Rule::Gap => "gap",
            Rule::Loss => "loss",
            Rule::Corrupt => "corrupt",
        }
    }
}

/// Per-rule counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// `starved: rate`.
    pub rate: RuleCount,
    /// `starved: gap`.
    pub gap: RuleCount,
    /// `starved: loss`.
    pub loss: RuleCount,
    /// `corrupt`.
    pub corrupt: RuleCount,
}

impl Rules {
    /// The count of `rule`.
    pub fn get(&self, rule: Rule) -> &RuleCount {
        match rule {
            Rule::Rate => &self.rate,
            Rule::Gap => &self.gap,
            Rule::Loss => &self.loss,
            Rule::Corrupt => &self.corrupt,
        }
    }

    /// The count of `rule`, to change.
    pub fn get_mut(&mut self, rule: Rule) -> &mut RuleCount {
        match rule {
            Rule::Rate => &mut self.rate,
            Rule::Gap => &mut self.gap,
            Rule::Loss => &mut self.loss,
            Rule::Corrupt => &mut self.corrupt,
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, o: &Rules) {
        for r in Rule::ALL {
            self.get_mut(r).merge(o.get(r));
        }
    }
}

/// What the bench's own listeners did on one mount, in the audience ledger's units (issue 23):
/// sessions (connections the server answered 200 and streamed) and their listening time, from
/// each connection's start to its close, so a run can be compared with `throng report
/// listening` over the same minutes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GroundTruth {
    /// Sessions (sessions).
    pub sessions: u64,
    /// Listening time summed over the sessions (seconds).
    pub listening_seconds: f64,
}

impl GroundTruth {
    /// Adds `other`'s sessions and seconds.
    pub fn add(&mut self, other: &GroundTruth) {
        self.sessions += other.sessions;
        self.listening_seconds += other.listening_seconds;
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}

/// One group at the end of one second, as one engine, process, host or the run knows it (see
/// the module comment for the three kinds of field).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    // ---- states at the end of the second (listeners)
    /// Listeners the stages ask for now (listeners).
    pub want: u32,
    /// Connecting or waiting for their response head (or, HLS, for their first segments).
    pub connecting: u32,
    /// Receiving the stream (stalled ones excluded).
    pub streaming: u32,
    /// Stalled on purpose: connected, never reading.
    pub stalled: u32,
    /// Starved now by any rule.
    pub starved: u32,
    /// Down after a failure (waiting to reconnect, or given up).
    pub down: u32,

    // ---- running totals since the start
    /// Listeners started at least once (listeners).
    pub started: u32,
    /// Connection attempts (connections).
    pub connects: u64,
    /// Failed connections by reason (`refused`, `http-503`, ...) (connections).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, u64>,
    /// Listeners that had at least one failed connection (listeners).
    pub failed_listeners: u32,
    /// Listeners starved at least once by any starved rule (listeners).
    pub starved_listeners: u32,
    /// Listeners starved, corrupt or failed at least once: the listeners who did not get the
    /// stream whole (listeners).
    #[serde(default)]
    pub troubled_listeners: u32,
    /// Listeners caught by each rule.
    pub rules: Rules,
    /// Media time delivered to the listeners (µs): frames × frame duration, Ogg granules, HLS
    /// segment media, RTP packet durations.
    pub media_us: u64,
    /// Wall time the listeners spent streaming (µs).
    pub listen_us: u64,
    /// Of `media_us`, what arrived after each listener's connect burst (µs).
    pub steady_media_us: u64,
    /// Of `listen_us`, the time after each listener's connect burst (µs).
    pub steady_listen_us: u64,
    /// Body bytes received (bytes).
    pub bytes: u64,
    /// Media units checked: MP3/ADTS frames, Ogg pages, HLS segments, RTP packets, events.
    pub units: u64,
    /// Bytes skipped while looking for frame sync (bytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub garbage_bytes: u64,
    /// ICY metadata blocks checked (blocks).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub icy_blocks: u64,
    /// HTTP requests sent (HLS players: playlists and segments) (requests).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
    /// Units known lost: RTP packets missing from the sequence, title changes a subscriber
    /// missed (units).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_units: u64,
    /// Event-stream subscribers: title-change receipts (receipts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub receipts: u64,
    /// Sessions whose media could not be verified (an unknown format): judged by bytes at the
    /// bitrate when one is known, else by gaps only (sessions).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub unverified: u32,
    /// Stalled listeners the server closed (listeners).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub stalled_dropped: u32,
    /// Bytes queued unread in the stalled listeners' sockets when last looked at (bytes; a
    /// state, not a total: what the server pushed before it stopped or gave up).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalled_held_bytes: u64,
    /// CPU of the engines (user + system, µs).
    pub cpu_us: u64,
    /// Per mount (the URL's path): sessions ended and their listening time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground_truth: BTreeMap<String, GroundTruth>,
    /// A mode's own running totals, by name, merged by addition (WHEP: datagrams, timer and
    /// loop wake-ups, busy time; see the mode's module).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,

    // ---- histograms of the second
    /// Time to first audio byte (HLS: segment request to first byte; events: connect to
    /// snapshot; WHEP: offer POST to first packet).
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub ttfb: Hist,
    /// TLS handshakes, from the connect (`https://`).
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub handshake: Hist,
    /// Gaps between two arrivals of media (one value per arrival after the first).
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub gap: Hist,
    /// Each ended session's longest gap.
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub longest_gap: Hist,
    /// Mouth-to-ear latency: source write to the listener's receipt, on the run's one clock.
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub m2e: Hist,
    /// Event-stream delivery latency: title change to receipt, on the run's one clock.
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub event_latency: Hist,
    /// Stalled listeners: connect to the server closing them.
    #[serde(default, skip_serializing_if = "Hist::is_empty")]
    pub stalled_drop: Hist,
}

impl Snapshot {
    /// Adds `o` into this summary: every state, total and histogram (see the module comment).
    pub fn merge(&mut self, o: &Snapshot) {
        self.merge_counts(o);
        self.merge_hists(o);
    }

    /// Adds `o`'s states and totals, not its histograms.
    pub fn merge_counts(&mut self, o: &Snapshot) {
        self.want += o.want;
        self.connecting += o.connecting;
        self.streaming += o.streaming;
        self.stalled += o.stalled;
        self.starved += o.starved;
        self.down += o.down;
        self.started += o.started;
        self.connects += o.connects;
        for (k, v) in &o.failures {
            *self.failures.entry(k.clone()).or_insert(0) += v;
        }
        self.failed_listeners += o.failed_listeners;
        self.starved_listeners += o.starved_listeners;
        self.troubled_listeners += o.troubled_listeners;
        self.rules.merge(&o.rules);
        self.media_us += o.media_us;
        self.listen_us += o.listen_us;
        self.steady_media_us += o.steady_media_us;
        self.steady_listen_us += o.steady_listen_us;
        self.bytes += o.bytes;
        self.units += o.units;
        self.garbage_bytes += o.garbage_bytes;
        self.icy_blocks += o.icy_blocks;
        self.requests += o.requests;
        self.lost_units += o.lost_units;
        self.receipts += o.receipts;
        self.unverified += o.unverified;
        self.stalled_dropped += o.stalled_dropped;
        self.stalled_held_bytes += o.stalled_held_bytes;
        self.cpu_us += o.cpu_us;
        for (k, g) in &o.ground_truth {
            self.ground_truth.entry(k.clone()).or_default().add(g);
        }
        for (k, v) in &o.extra {
            *self.extra.entry(k.clone()).or_insert(0.0) += v;
        }
    }

    /// Adds `o`'s histograms only.
    pub fn merge_hists(&mut self, o: &Snapshot) {
        self.ttfb.merge(&o.ttfb);
        self.handshake.merge(&o.handshake);
        self.gap.merge(&o.gap);
        self.longest_gap.merge(&o.longest_gap);
        self.m2e.merge(&o.m2e);
        self.event_latency.merge(&o.event_latency);
        self.stalled_drop.merge(&o.stalled_drop);
    }

    /// Empties the histograms (an engine's after each second's report).
    pub fn clear_hists(&mut self) {
        self.ttfb.clear();
        self.handshake.clear();
        self.gap.clear();
        self.longest_gap.clear();
        self.m2e.clear();
        self.event_latency.clear();
        self.stalled_drop.clear();
    }

    /// Failed connections, all reasons (connections).
    pub fn failures_total(&self) -> u64 {
        self.failures.values().sum()
    }

    /// Listeners holding a connection: streaming + stalled (listeners).
    pub fn connected(&self) -> u32 {
        self.streaming + self.stalled
    }
}

/// A listener's flags: which rules caught it so far and whether a connection of it failed
/// (one byte per listener), so each count counts it once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caught(u8);

/// The flag of a failed connection.
const FAILED: u8 = 16;

impl Caught {
    fn bit(rule: Rule) -> u8 {
        match rule {
            Rule::Rate => 1,
            Rule::Gap => 2,
            Rule::Loss => 4,
            Rule::Corrupt => 8,
        }
    }

    /// Whether `rule` caught the listener before.
    pub fn has(self, rule: Rule) -> bool {
        self.0 & Caught::bit(rule) != 0
    }

    /// Whether any starved rule caught it before.
    pub fn starved(self) -> bool {
        self.0 & 7 != 0
    }

    /// Whether anything happened to it (a rule, a failure).
    pub fn troubled(self) -> bool {
        self.0 != 0
    }

    /// Records `rule` for this listener in `snap` at `second` unless it caught it before;
    /// returns whether this was new.
    pub fn catch(&mut self, rule: Rule, snap: &mut Snapshot, second: u32) -> bool {
        if self.has(rule) {
            return false;
        }
        snap.rules.get_mut(rule).catch(second);
        if rule != Rule::Corrupt && !self.starved() {
            snap.starved_listeners += 1;
        }
        if !self.troubled() {
            snap.troubled_listeners += 1;
        }
        self.0 |= Caught::bit(rule);
        true
    }

    /// Records a failed connection of this listener in `snap` (counted once per listener).
    pub fn fail(&mut self, snap: &mut Snapshot) {
        if self.0 & FAILED != 0 {
            return;
        }
        snap.failed_listeners += 1;
        if !self.troubled() {
            snap.troubled_listeners += 1;
        }
        self.0 |= FAILED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_merge_by_addition() {
        let mut a = Snapshot {
            want: 10,
            streaming: 9,
            connects: 12,
            media_us: 5_000_000,
            ..Snapshot::default()
        };
        a.failures.insert("refused".into(), 2);
        a.ttfb.record_us(1000);
        let mut caught = Caught::default();
        assert!(caught.catch(Rule::Rate, &mut a, 7));
        assert!(!caught.catch(Rule::Rate, &mut a, 8));
        assert!(caught.catch(Rule::Gap, &mut a, 9));
        assert!(caught.catch(Rule::Corrupt, &mut a, 3));
        caught.fail(&mut a);
        caught.fail(&mut a);
        assert_eq!(a.starved_listeners, 1, "one listener, two starved rules");
        assert_eq!((a.failed_listeners, a.troubled_listeners), (1, 1));
        let mut b = a.clone();
        b.rules.rate.first_s = Some(2);
        let mut m = Snapshot::default();
        m.merge(&a);
        m.merge(&b);
        assert_eq!((m.want, m.streaming, m.connects), (20, 18, 24));
        assert_eq!(m.failures["refused"], 4);
        assert_eq!(
            m.rules.rate,
            RuleCount {
                listeners: 2,
                first_s: Some(2)
            }
        );
        assert_eq!(m.rules.corrupt.first_s, Some(3));
        assert_eq!(m.starved_listeners, 2);
        assert_eq!(m.ttfb.count(), 2);
        // Through JSON, as a worker line.
        let back: Snapshot = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
