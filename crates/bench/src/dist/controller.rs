//! The controller of a run over agents (being written).

use crate::report::summary::RunReport;
use crate::run::plan::{Plan, RunError};
use std::path::PathBuf;
use std::time::Duration;

/// How the controller reaches its agents.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How long to keep trying to reach them.
    pub wait: Duration,
    /// The CA of their certificates (TLS).
    pub ca: Option<PathBuf>,
}

/// Runs `plan` over its agents.
///
/// Errors: always, for now.
pub fn run(plan: &Plan, o: &Options) -> Result<RunReport, RunError> {
    let _ = (plan, o);
    Err(RunError::Agents("not yet".into()))
}
