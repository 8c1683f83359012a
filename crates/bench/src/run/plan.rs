//! The one plan of a run, whatever its mode: what to load, how, and what to watch. `throng
//! bench run` builds one from its flags, `throng bench compare` one per server of a scenario.

use crate::events::EventArgs;
use crate::mode::Mode;
use crate::observe::sampler::SampleTarget;
use crate::profile::{Profile, ProfileError};
use crate::run::worker::{Launcher, WorkerError};
use crate::source::{SourceConfig, SourceError};
use crate::whep::probe::ProbeConfig;
use crate::whep::viewer::WhepArgs;
use thiserror::Error;

/// Everything needed for one run.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Name of the run.
    pub name: String,
    /// What the simulated clients are (see [`crate::mode::choose`]).
    pub mode: Mode,
    /// Listener URLs (event streams for [`Mode::Events`], WHEP endpoints for [`Mode::Whep`]).
    pub urls: Vec<String>,
    /// The profile (listener count, ramp, hold, workers, ...).
    pub profile: Profile,
    /// Source to push first, if any (ICY and HLS runs).
    pub source: Option<SourceConfig>,
    /// Server to sample, if any.
    pub sample: Option<SampleTarget>,
    /// Worker process launcher (default: this executable).
    pub launcher: Option<Launcher>,
    /// Show the live progress display (ICY and HLS runs).
    pub progress: bool,
    /// The flags of an events run.
    pub events: EventArgs,
    /// The flags of a WHEP run.
    pub whep: WhepArgs,
    /// The latency probe (`--latency-source`): a stamped source and ICY probe listeners.
    pub probe: Option<ProbeConfig>,
}

impl Plan {
    /// The local server process the plan samples, if it samples one (not a metrics URL).
    pub fn server_pid(&self) -> Option<u32> {
        match &self.sample {
            Some(SampleTarget::Pid(p)) => Some(*p),
            _ => None,
        }
    }

    /// The launcher of worker processes: the plan's, else this executable as `bench worker`.
    ///
    /// Errors: the current executable cannot be found.
    pub fn launcher(&self) -> std::io::Result<Launcher> {
        match &self.launcher {
            Some(l) => Ok(l.clone()),
            None => Launcher::current_exe(),
        }
    }
}

/// Errors of a run.
#[derive(Debug, Error)]
pub enum RunError {
    /// The profile is invalid.
    #[error("profile: {0}")]
    Profile(#[from] ProfileError),
    /// The source could not start.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Workers could not start.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The current executable could not be found.
    #[error("locating the worker executable: {0}")]
    Exe(std::io::Error),
    /// No URL.
    #[error("no listener URL given")]
    NoUrl,
    /// An events or WHEP run failed (bad arguments, workers, the server refusing).
    #[error("{0:#}")]
    Mode(anyhow::Error),
}
