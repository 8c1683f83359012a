//! `throng bench agent` (being written).

use clap::Args;

/// The exit statuses and environment of `throng bench agent`, for `--help`.
pub const AGENT_HELP: &str = "The token comes from THRONG_BENCH_TOKEN.";

/// Arguments of `throng bench agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to listen on for a controller.
    #[arg(long, default_value = "0.0.0.0:7700")]
    pub listen: String,
}

/// Body of `throng bench agent`.
///
/// Errors: always, for now.
pub fn agent_command(a: AgentArgs) -> anyhow::Result<()> {
    anyhow::bail!("bench agent on {}: not yet", a.listen)
}
