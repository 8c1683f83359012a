//! What one engine is handed: its [`Slice`] of one audience group (the group's URLs, stages and
//! the execution segment of its listeners), how those listeners behave ([`Behaviour`]: session
//! lengths, churn, a reconnect storm, a stalled share, reconnects), the rules that judge them
//! ([`Judge`]), and the run's one clock ([`RunClock`]).

use crate::profile::secs::Secs;
use crate::profile::segment::ExecutionSegment;
use crate::profile::stages::Schedule;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a group's listeners come and go (any mode; each engine applies what its mode can).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Behaviour {
    /// Sessions of a random length: a listener leaves after a time drawn evenly in
    /// `[session-min, session-max]` once it streams, and rejoins at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_min: Option<Secs>,
    /// Longest session (see `session-min`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_max: Option<Secs>,
    /// Listeners of the group that leave and rejoin per second while the target holds
    /// (listeners/s, the whole group's; each engine its share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn_rate: Option<f64>,
    /// When (seconds since the run's start) every listener of the group drops and reconnects
    /// at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_at: Option<Secs>,
    /// Share of the group's listeners (0 to 1) that send their request and never read.
    #[serde(skip_serializing_if = "is_zero")]
    pub stalled: f64,
    /// Reconnect a listener that failed after this delay (default: it stays down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_after: Option<Secs>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Behaviour {
    /// The session length range in µs, when both ends are set.
    pub fn session_range_us(&self) -> Option<(u64, u64)> {
        match (self.session_min, self.session_max) {
            (Some(a), Some(b)) => Some(((a.0 * 1e6) as u64, (b.0 * 1e6) as u64)),
            _ => None,
        }
    }

    /// Checks ranges.
    ///
    /// Errors: the reason in words.
    pub fn validate(&self) -> Result<(), String> {
        match (self.session_min, self.session_max) {
            (None, None) => {}
            (Some(a), Some(b)) if a.0 > 0.0 && b.0 >= a.0 => {}
            _ => return Err("session-min needs session-max, both > 0 s, min ≤ max".into()),
        }
        if !(0.0..=1.0).contains(&self.stalled) {
            return Err("stalled: a share between 0 and 1".into());
        }
        if self.churn_rate.is_some_and(|r| r.is_nan() || r < 0.0) {
            return Err("churn-rate: listeners per second, ≥ 0".into());
        }
        Ok(())
    }
}

/// Whether listener `id` is one of a share `fraction` (0 to 1) of the listeners, spread evenly
/// (every 1/fraction-th one): the stalled ones.
pub fn in_share(id: u32, fraction: f64) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    let a = (f64::from(id) * fraction).floor();
    let b = (f64::from(id + 1) * fraction).floor();
    b > a
}

/// The rules that judge a group's listeners (each counted on its own, see
/// [`crate::stats::Rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Judge {
    /// `starved: rate` below this share of real time over the window (0 to 1).
    pub min_rate: f64,
    /// The sliding window of the rate rule (whole seconds, 1 to 15).
    pub window_s: u32,
    /// `starved: gap` above this gap between arrivals (ms): a player's buffer.
    pub max_gap_ms: u32,
    /// `starved: loss` above this share of RTP packets lost in a window (0 to 1; WebRTC).
    pub max_loss: f64,
    /// Connect plus response-head timeout (ms).
    pub connect_timeout_ms: u32,
}

impl Default for Judge {
    /// 80 % of real time over 5 s, a 4 s buffer, 1 % loss, a 10 s connect timeout.
    fn default() -> Judge {
        Judge {
            min_rate: 0.8,
            window_s: 5,
            max_gap_ms: 4000,
            max_loss: 0.01,
            connect_timeout_ms: 10_000,
        }
    }
}

/// One engine's slice of one group: everything but the mode's own options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// The group's index in the plan (ticks carry it).
    pub group: u16,
    /// The group's name.
    pub name: String,
    /// The group's URLs; listener `i` uses `urls[i % urls.len()]`.
    pub urls: Vec<String>,
    /// The group's stages.
    pub schedule: Schedule,
    /// Which of the group's listeners this engine runs.
    pub segment: ExecutionSegment,
    /// How the listeners behave.
    pub behaviour: Behaviour,
    /// How they are judged.
    pub judge: Judge,
    /// Second 0 of the run on this host's clock (ms since the Unix epoch): every engine of
    /// every host ticks at the same instants.
    pub start_unix_ms: u64,
    /// The run's clock minus this host's (µs; see [`RunClock`]).
    #[serde(default)]
    pub clock_offset_us: i64,
    /// Report the CPU of the engine's thread, not its process (an in-process engine).
    #[serde(default)]
    pub thread_cpu: bool,
    /// Local source addresses, `FIRST-LAST` (IPv4) or `none`, bound round-robin for loopback
    /// targets and for targets in the same /24 as one of them.
    pub bind_range: String,
}

impl Slice {
    /// This engine's listener numbers, ascending.
    pub fn ids(&self) -> Vec<u32> {
        self.segment.ids(self.schedule.peak())
    }

    /// How many of `ids` are on `t_s` seconds after the start.
    pub fn on_at(&self, ids: &[u32], t_s: f64) -> usize {
        ExecutionSegment::on_at(ids, self.schedule.target_at(t_s))
    }

    /// The run's end, in seconds after the start.
    pub fn end_s(&self) -> f64 {
        self.schedule.total_secs()
    }
}

/// The run's one clock on this host: this host's wall clock corrected by the offset the
/// controller measured (RFC 5905 §8, see the `dist` module); on one machine the offset is 0.
/// Cross-host latencies (mouth-to-ear, event delivery) are differences of a stamp made on the
/// run's clock and a receipt read here, so the receipt is read through this clock.
#[derive(Debug, Default)]
pub struct RunClock {
    /// The run's clock minus this host's (µs); updated while the run goes.
    offset_us: AtomicI64,
}

impl RunClock {
    /// A clock `offset_us` µs ahead of this host's (negative: behind).
    pub fn new(offset_us: i64) -> RunClock {
        RunClock {
            offset_us: AtomicI64::new(offset_us),
        }
    }

    /// Sets a new offset (a new estimate during the run).
    pub fn set_offset_us(&self, offset_us: i64) {
        self.offset_us.store(offset_us, Ordering::Relaxed);
    }

    /// The offset (µs).
    pub fn offset_us(&self) -> i64 {
        self.offset_us.load(Ordering::Relaxed)
    }

    /// The run's time of this host's wall-clock time `local_unix_us` (µs since the epoch).
    pub fn to_run_us(&self, local_unix_us: u64) -> u64 {
        (local_unix_us as i64)
            .saturating_add(self.offset_us())
            .max(0) as u64
    }

    /// Now on the run's clock (µs since the Unix epoch).
    pub fn now_us(&self) -> u64 {
        self.to_run_us(unix_us())
    }
}

/// This host's wall clock (µs since the Unix epoch).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Sleeps until the wall-clock time `start_unix_ms` (ms since the Unix epoch); at once when it
/// has passed. Returns early when `stop` says so (checked every 50 ms).
pub fn sleep_until_unix_ms(start_unix_ms: u64, stop: &dyn Fn() -> bool) {
    loop {
        let now = unix_us() / 1000;
        if now >= start_unix_ms || stop() {
            return;
        }
        std::thread::sleep(Duration::from_millis((start_unix_ms - now).min(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_spread() {
        let n = (0..1000).filter(|&i| in_share(i, 0.1)).count();
        assert_eq!(n, 100);
        assert_eq!((0..1000).filter(|&i| in_share(i, 0.0)).count(), 0);
        assert_eq!((0..10).filter(|&i| in_share(i, 1.0)).count(), 10);
    }

    #[test]
    fn the_run_clock_shifts_this_hosts_time() {
        let c = RunClock::new(-250_000);
        assert_eq!(c.to_run_us(1_000_000), 750_000);
        c.set_offset_us(5);
        assert_eq!(c.to_run_us(10), 15);
        assert!(Behaviour {
            stalled: 2.0,
            ..Behaviour::default()
        }
        .validate()
        .is_err());
    }
}
