//! The errors of a run, and the plan it runs (re-exported from [`crate::scenario::plan`], where
//! flags and scenario files both become one).

pub use crate::scenario::plan::{GroupPlan, Plan};

use crate::profile::ProfileError;
use crate::run::worker::WorkerError;
use crate::source::SourceError;
use thiserror::Error;

/// Errors of a run (each makes the bench exit with status 2: it could not run).
#[derive(Debug, Error)]
pub enum RunError {
    /// The profile is invalid.
    #[error("profile: {0}")]
    Profile(#[from] ProfileError),
    /// The plan makes no sense (groups, stages, thresholds, an address to listen on).
    #[error("{0}")]
    Plan(String),
    /// The source could not start.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Workers could not start.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// A mode's setup failed (an events group without its admin password, ...).
    #[error("{0:#}")]
    Mode(anyhow::Error),
    /// The agents of a run over several machines could not take the run.
    #[error("{0}")]
    Agents(String),
}
