//! Now-playing event-stream subscribers (`throng bench run --events URL`, or an `events`
//! group): SSE clients of `/api/v1/events` that time each title change from trigger to receipt
//! ([`subscriber`]), and the flags of an events run ([`EventArgs`]).

pub mod subscriber;

/// Subscribers on the sampled server below which an events run does not judge memory: the
/// server's RSS moves by whole pages and allocator arenas, so at a few dozen subscribers the
/// growth per subscriber is noise (20 subscribers and one 64 KiB arena read as 3 KiB each).
pub const MIN_SUBSCRIBERS_FOR_MEMORY: u32 = 500;

use crate::profile::Secs;
use clap::Args;
use serde::Deserialize;

/// The flags of an events run (with `--events`).
#[derive(Debug, Clone, Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventArgs {
    /// The URLs are event streams (`http://host:port/api/v1/events`): load them with SSE
    /// subscribers and measure the delivery of title changes instead of audio.
    #[arg(long)]
    #[serde(skip)]
    pub events: bool,
    /// With `--events`: the mount whose title the run changes, `http://host:port/mount` (an
    /// origin, for subscribers on its relay edges). Default: the `?mount=` of the first URL, on
    /// its server.
    #[arg(long, value_name = "URL")]
    pub trigger_url: Option<String>,
    /// With `--events`: admin user for the title changes.
    #[arg(long, default_value = "admin")]
    pub admin_user: String,
    /// With `--events`: admin password for the title changes (or the `THRONG_ADMIN_PASSWORD`
    /// environment variable).
    #[arg(long)]
    pub admin_password: Option<String>,
    /// With `--events`: title changes to make once every subscriber is ready (1 to 64; a
    /// scenario's events group makes one every interval while it lasts unless `changes` says).
    #[arg(long, default_value_t = 5)]
    pub changes: u32,
    /// With `--events`: time between two title changes.
    #[arg(long, default_value = "2s")]
    pub change_interval: Secs,
    /// With `--events`: the verdict needs the p99 delivery latency within this.
    #[arg(long, default_value = "1s")]
    pub max_latency: Secs,
    /// With `--events`: the verdict needs the server's RSS growth per subscriber within this
    /// (bytes; checked when the server is sampled with `--pid`, `--pid-file` or `--pid-name`:
    /// the first URL's server, holding its round-robin share of the subscribers, and only from
    /// 500 subscribers on it: below that, page-size noise; the figure is reported all the same).
    #[arg(long, default_value_t = 1024.0)]
    pub max_rss_per_subscriber: f64,
}

impl Default for EventArgs {
    /// The command line's defaults (a scenario's `[events]` table starts from them).
    fn default() -> EventArgs {
        EventArgs {
            events: false,
            trigger_url: None,
            admin_user: "admin".into(),
            admin_password: None,
            changes: 5,
            change_interval: Secs(2.0),
            max_latency: Secs(1.0),
            max_rss_per_subscriber: 1024.0,
        }
    }
}
