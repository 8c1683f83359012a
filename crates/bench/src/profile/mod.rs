//! What a bench run does, in the load-testing world's terms: stages ([`stages`], k6's model), the
//! execution segment each engine runs of a group ([`segment`]), and the behaviour and judging
//! rules of a group's listeners with the slice an engine is handed ([`slice`]), and the crowd an
//! engine drives through them ([`crowd`]).
//!
//! [`Profile`] is the older, one-group description: the flags of `throng bench run` and the
//! `[profile]` table of a compare scenario (TOML); [`Profile::schedule`] turns its listener
//! count, ramp and hold into stages. Durations are written `500ms`, `30s`, `2m` or as plain
//! seconds.

pub mod crowd;
pub mod secs;
pub mod segment;
pub mod slice;
pub mod stages;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use secs::{BadDuration, Secs};

/// The load profile: how listeners come and go during the hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileKind {
    /// Ramp up to the listener count, hold, close.
    #[default]
    RampHold,
    /// Ramp-and-hold, while `churn_rate` listeners per second leave and rejoin at once.
    Churn,
    /// Ramp-and-hold; at `storm_at` into the hold every listener drops and reconnects at once.
    Storm,
    /// Ramp-and-hold where `stalled_fraction` of listeners send their request and never read.
    Stalled,
}

/// One bench run's parameters (CLI flags of `throng bench run`, or a scenario's `[profile]`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Number of simulated listeners (listeners, total over all URLs and workers).
    #[arg(short = 'n', long, default_value_t = 100)]
    pub listeners: u32,
    /// New listeners started per second during the ramp (listeners/s, total).
    #[arg(long, default_value_t = 1000.0)]
    pub ramp: f64,
    /// How long to hold once every listener was started (e.g. `30s`).
    #[arg(long, default_value = "30s")]
    pub hold: Secs,
    /// Load profile.
    #[arg(long, value_enum, default_value_t = ProfileKind::RampHold)]
    pub profile: ProfileKind,
    /// The stream's bitrate in kbit/s, if you know it. Never needed to judge: every
    /// listener's media time is read from its frames. A bitrate that disagrees with the
    /// stream's (its frames, its `icy-br`) is reported; for a stream of an unknown format it
    /// turns bytes into media time.
    #[arg(long)]
    pub bitrate_kbps: Option<f64>,
    /// A listener is starved (`starved: rate`) when the media time it receives over `window`
    /// is less than this share of the wall time (percent of real time).
    #[arg(long, default_value_t = 80.0)]
    pub min_rate_pct: f64,
    /// Sliding window for the bitrate check (whole seconds, 1 to 15).
    #[arg(long, default_value = "5s")]
    pub window: Secs,
    /// A gap between arrivals longer than this (a player's buffer) makes a listener starved
    /// (`starved: gap`).
    #[arg(long, default_value = "4s")]
    pub max_gap: Secs,
    /// Stages instead of `-n`, `--ramp` and `--hold`, as k6's `--stage`: `DURATION:TARGET`,
    /// repeatable (`--stage 30s:2000 --stage 60s:2000 --stage 10s:0`); each ramps linearly from
    /// the previous target (0 at the start) to its own over its duration.
    #[arg(long = "stage", value_name = "DURATION:TARGET")]
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "stages")]
    pub stages: Vec<stages::Stage>,
    /// Churn profile: listeners that leave and rejoin per second (listeners/s, total; default
    /// 1 % of the listeners).
    #[arg(long)]
    pub churn_rate: Option<f64>,
    /// Sessions of a random length: each listener leaves after a time drawn evenly between
    /// `--session-min` and `--session-max` once it streams, and rejoins at once (any profile;
    /// both must be set).
    #[arg(long, requires = "session_max")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_min: Option<Secs>,
    /// Longest session (see `--session-min`).
    #[arg(long, requires = "session_min")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_max: Option<Secs>,
    /// Storm profile: when, after the hold starts, every listener reconnects (default: half the
    /// hold).
    #[arg(long)]
    pub storm_at: Option<Secs>,
    /// Stalled profile: share of listeners that never read (0 to 1; default 0.1).
    #[arg(long)]
    pub stalled_fraction: Option<f64>,
    /// Ask for ICY metadata (`Icy-MetaData: 1`) and check the block framing of every listener.
    #[arg(long)]
    pub icy: bool,
    /// Reconnect a listener that failed after this delay (default: a failed listener stays
    /// down).
    #[arg(long)]
    pub reconnect_after: Option<Secs>,
    /// Connect plus response-head timeout.
    #[arg(long, default_value = "10s")]
    pub connect_timeout: Secs,
    /// HLS players: never use blocking playlist reload (`_HLS_msn`), even when the playlist
    /// advertises `CAN-BLOCK-RELOAD=YES`; reload on the RFC 8216 timer instead (a player without
    /// low-latency support).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hls_no_blocking_reload: bool,
    /// Worker processes (0: one in-process event-loop thread; default: one per
    /// `max_per_worker` listeners, in-process when one suffices).
    #[arg(long)]
    pub workers: Option<u32>,
    /// Most sockets one worker process opens (sockets; the per-process fd limit is 20,000).
    #[arg(long, default_value_t = 15_000)]
    pub max_per_worker: u32,
    /// Local source addresses bound round-robin for loopback targets, `FIRST-LAST` (IPv4), or
    /// `none`.
    #[arg(long, default_value = "127.0.0.2-127.0.0.40")]
    pub bind_range: String,
    /// For `https://` URLs: accept any server certificate (self-signed test servers).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// For `https://` URLs: PEM file of the certificate authorities to trust (default: the
    /// web PKI roots).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<std::path::PathBuf>,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            listeners: 100,
            ramp: 1000.0,
            hold: Secs(30.0),
            profile: ProfileKind::RampHold,
            bitrate_kbps: None,
            min_rate_pct: 80.0,
            window: Secs(5.0),
            max_gap: Secs(4.0),
            stages: Vec::new(),
            churn_rate: None,
            session_min: None,
            session_max: None,
            storm_at: None,
            stalled_fraction: None,
            icy: false,
            reconnect_after: None,
            connect_timeout: Secs(10.0),
            hls_no_blocking_reload: false,
            workers: None,
            max_per_worker: 15_000,
            bind_range: "127.0.0.2-127.0.0.40".to_owned(),
            insecure: false,
            ca: None,
        }
    }
}

/// A profile whose values make no sense.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProfileError {
    /// A value is out of its range.
    #[error("{field}: {why}")]
    OutOfRange {
        /// The field's name.
        field: &'static str,
        /// What is wrong.
        why: String,
    },
}

fn bad(field: &'static str, why: impl Into<String>) -> ProfileError {
    ProfileError::OutOfRange {
        field,
        why: why.into(),
    }
}

impl Profile {
    /// The connect rate (listeners per second) of a worker holding `n` of the profile's
    /// listeners: its share of `ramp`, at least 0.001/s.
    pub fn worker_ramp(&self, n: u32) -> f64 {
        let total = self.listeners.max(1);
        (self.ramp * f64::from(n) / f64::from(total)).max(0.001)
    }

    /// Checks ranges (window 1–15 s, positive ramp, fractions within 0–1, ...).
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.listeners == 0 && self.stages.is_empty() {
            return Err(bad("listeners", "must be at least 1"));
        }
        if let Err(why) = self.schedule().validate() {
            return Err(bad("stage", why));
        }
        match (self.session_min, self.session_max) {
            (None, None) => {}
            (Some(a), Some(b)) if a.0 > 0.0 && b.0 >= a.0 => {}
            _ => {
                return Err(bad(
                    "session-min",
                    "needs session-max, both > 0 s, session-min ≤ session-max",
                ))
            }
        }
        if self.ramp.is_nan() || self.ramp <= 0.0 {
            return Err(bad("ramp", "must be > 0 listeners/s"));
        }
        let w = self.window.0.round();
        if !(1.0..=15.0).contains(&w) {
            return Err(bad("window", "must be 1 to 15 whole seconds"));
        }
        if !(0.0..=100.0).contains(&self.min_rate_pct) {
            return Err(bad("min_rate_pct", "must be 0 to 100"));
        }
        if let Some(v) = self.stalled_fraction {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad("stalled_fraction", "must be between 0 and 1"));
            }
        }
        if self.max_per_worker == 0 || self.max_per_worker > 19_000 {
            return Err(bad("max_per_worker", "must be 1 to 19000 sockets"));
        }
        if let Some(b) = self.bitrate_kbps {
            if b.is_nan() || b <= 0.0 {
                return Err(bad("bitrate_kbps", "must be > 0"));
            }
        }
        Ok(())
    }

    /// The sliding window in whole seconds.
    pub fn window_secs(&self) -> u32 {
        self.window.0.round().clamp(1.0, 15.0) as u32
    }

    /// The session length range in µs, when `--session-min`/`--session-max` are set.
    pub fn session_range_us(&self) -> Option<(u64, u64)> {
        match (self.session_min, self.session_max) {
            (Some(a), Some(b)) => Some(((a.0 * 1e6) as u64, (b.0 * 1e6) as u64)),
            _ => None,
        }
    }

    /// Churn rate actually used (listeners/s, total): set, or 1 % of listeners for `churn`.
    pub fn effective_churn_rate(&self) -> f64 {
        match (self.profile, self.churn_rate) {
            (_, Some(r)) => r,
            (ProfileKind::Churn, None) => (self.listeners as f64 / 100.0).max(1.0),
            _ => 0.0,
        }
    }

    /// When the storm happens (seconds after the hold starts), if any.
    pub fn effective_storm_at(&self) -> Option<f64> {
        match (self.profile, self.storm_at) {
            (_, Some(s)) => Some(s.0),
            (ProfileKind::Storm, None) => Some(self.hold.0 / 2.0),
            _ => None,
        }
    }

    /// Share of listeners that never read (0 to 1).
    pub fn effective_stalled_fraction(&self) -> f64 {
        match (self.profile, self.stalled_fraction) {
            (_, Some(f)) => f,
            (ProfileKind::Stalled, None) => 0.1,
            _ => 0.0,
        }
    }

    /// Worker processes to spawn for `peak` listeners (0 = in-process thread).
    pub fn effective_workers(&self, peak: u32) -> u32 {
        match self.workers {
            Some(w) => w,
            None if peak <= self.max_per_worker => 0,
            None => peak.div_ceil(self.max_per_worker),
        }
    }

    /// Ramp duration in seconds (the first stage's, with `--stage`).
    pub fn ramp_secs(&self) -> f64 {
        match self.stages.first() {
            Some(s) => s.duration.0,
            None => self.listeners as f64 / self.ramp,
        }
    }

    /// The stages: `--stage` when given, else a ramp to `listeners` at `ramp` per second and
    /// a hold of `hold` (k6's `ramping-vus` shape).
    pub fn schedule(&self) -> stages::Schedule {
        if self.stages.is_empty() {
            stages::Schedule::ramp_hold(self.listeners, self.ramp, self.hold.0)
        } else {
            stages::Schedule {
                stages: self.stages.clone(),
            }
        }
    }

    /// The listeners' behaviour: session lengths, churn, the storm (its time counted from the
    /// run's start: `--storm-at` counts from the hold's), the stalled share, reconnects.
    pub fn behaviour(&self) -> slice::Behaviour {
        let churn = self.effective_churn_rate();
        slice::Behaviour {
            session_min: self.session_min,
            session_max: self.session_max,
            churn_rate: (churn > 0.0).then_some(churn),
            storm_at: self
                .effective_storm_at()
                .map(|s| Secs(self.ramp_secs() + s)),
            stalled: self.effective_stalled_fraction(),
            reconnect_after: self.reconnect_after,
        }
    }

    /// The judging rules of the flags.
    pub fn judge(&self) -> slice::Judge {
        slice::Judge {
            min_rate: self.min_rate_pct / 100.0,
            window_s: self.window_secs(),
            max_gap_ms: (self.max_gap.0 * 1000.0) as u32,
            connect_timeout_ms: (self.connect_timeout.0 * 1000.0) as u32,
            ..slice::Judge::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!("500ms".parse::<Secs>().unwrap(), Secs(0.5));
        assert_eq!("2m".parse::<Secs>().unwrap(), Secs(120.0));
        assert_eq!("7".parse::<Secs>().unwrap(), Secs(7.0));
        assert!("x".parse::<Secs>().is_err());
        assert!("-1s".parse::<Secs>().is_err());
    }

    #[test]
    fn profile_from_toml() {
        let p: Profile =
            toml::from_str("listeners = 10\nhold = \"2s\"\nprofile = \"churn\"").unwrap();
        assert_eq!(p.listeners, 10);
        assert_eq!(p.hold, Secs(2.0));
        assert_eq!(p.effective_churn_rate(), 1.0);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn workers_split() {
        let p = Profile::default();
        assert_eq!(p.effective_workers(21_000), 2);
        assert_eq!(p.effective_workers(500), 0);
        // The older flags become a ramp stage and a hold stage; the storm counts from the
        // run's start.
        let p = Profile {
            listeners: 1000,
            ramp: 500.0,
            hold: Secs(20.0),
            profile: ProfileKind::Storm,
            ..Profile::default()
        };
        assert_eq!(p.schedule().total_secs(), 22.0);
        assert_eq!(p.behaviour().storm_at, Some(Secs(12.0)));
    }
}
