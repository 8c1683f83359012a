//! The WHEP viewer engine (being rewritten to the staged, per-group engine contract).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::profile::slice::{RunClock, Slice};
use crate::stats::GroupTick;
use crate::whep::bursts::BurstSchedule;

/// Gap between two packets above which a viewer is degraded (issue 16: 200 ms).
pub const MAX_GAP: Duration = Duration::from_millis(200);

/// The flags of a WHEP run (a comparison scenario's `[whep]` table takes `whep_threads`).
#[derive(Debug, Clone, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhepArgs {
    /// The URLs are WHEP endpoints (`http://host:port/whep/<mount>`): load them with WebRTC
    /// viewers (str0m clients) instead of HTTP listeners. Viewers are spread over `--workers`
    /// processes (default: one per CPU); against a loopback server each viewer has its own
    /// 127.100.x.y address on its thread's one shared socket, else its own socket over the
    /// `--bind-range` source addresses.
    #[arg(long)]
    #[serde(skip)]
    pub whep: bool,
    /// With `--whep`: threads per worker process driving its viewers (each with its own
    /// connector thread for the POSTs).
    #[arg(long, default_value_t = 1)]
    pub whep_threads: usize,
    /// Push a latency probe as the live source of this Ogg/Opus mount (`http://host:port/mount`,
    /// with `--source-user`, `--source-password`, `--source-method`): one 20 ms Opus packet
    /// per Ogg page, each stamped with its send time, so viewers of the mount's WHEP endpoint
    /// (`--whep`) and `--latency-icy` ICY listeners of the mount report mouth-to-ear latency.
    /// Without `--whep` the run's listeners load the mount and the ICY probes measure. With
    /// `--latency-bursts` the mount is an MP3 one fed with tone bursts instead.
    #[arg(long, value_name = "URL")]
    #[serde(skip)]
    pub latency_source: Option<String>,
    /// With `--latency-source`: ICY listeners of the probe mount measuring the same latency
    /// (not with `--latency-bursts`).
    #[arg(long, default_value_t = 4)]
    #[serde(skip)]
    pub latency_icy: u32,
    /// With `--latency-source` naming an MP3 mount: push this MP3 file of tone bursts (a burst
    /// at the start of every whole second of its media, silence between; looped) in real time
    /// instead of stamped Opus. The server transcodes the mount to Opus for its WHEP viewers,
    /// who hear each burst begin as a large Opus packet after small ones; the delay from the
    /// source writing the burst's MP3 frame to that packet's arrival is the latency (an upper
    /// bound: it includes the MP3 encoder's delay). ICY latency is not measured then.
    #[arg(long, value_name = "FILE.mp3", requires = "latency_source")]
    #[serde(skip)]
    pub latency_bursts: Option<std::path::PathBuf>,
}

impl Default for WhepArgs {
    /// The command line's defaults.
    fn default() -> WhepArgs {
        WhepArgs {
            whep: false,
            whep_threads: 1,
            latency_source: None,
            latency_icy: 4,
            latency_bursts: None,
        }
    }
}

/// What one WHEP engine runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WhepSpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// Driving threads.
    pub threads: u32,
    /// The latency probe's tone-burst schedule.
    #[serde(default)]
    pub bursts: Option<BurstSchedule>,
}

/// Runs one worker's viewers.
///
/// Errors: always, for now.
pub fn run_worker(
    spec: &WhepSpec,
    clock: Arc<RunClock>,
    stop: &AtomicBool,
    report: impl FnMut(&GroupTick) -> bool,
) -> anyhow::Result<()> {
    let _ = (spec, clock, stop, report);
    anyhow::bail!("WHEP viewers: not rewired yet")
}
