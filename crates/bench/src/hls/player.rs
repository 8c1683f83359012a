//! The HLS player engine (being rewritten to the staged, per-group engine contract).

use crate::icy::engine::EngineError;
use crate::profile::slice::{RunClock, Slice};
use crate::stats::GroupTick;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What one HLS engine runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HlsSpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// Never use blocking playlist reload.
    #[serde(default)]
    pub no_blocking_reload: bool,
}

/// One worker's HLS players.
pub struct HlsEngine {
    spec: HlsSpec,
}

impl HlsEngine {
    /// Prepares the players.
    ///
    /// Errors: none yet.
    pub fn new(spec: HlsSpec, clock: Arc<RunClock>) -> Result<HlsEngine, EngineError> {
        let _ = clock;
        Ok(HlsEngine { spec })
    }

    /// Runs the players.
    ///
    /// Errors: always, for now.
    pub fn run(
        self,
        stop: &AtomicBool,
        report: impl FnMut(&GroupTick) -> bool,
    ) -> Result<(), EngineError> {
        let _ = (self.spec, stop, report);
        Err(EngineError::NoUrl)
    }
}
