//! `throng bench`: a load generator that measures what listeners hear, not how many connect.
//!
//! Simulated listeners (a `mio` event loop per worker, a few hundred bytes of state each) connect
//! to one or more Icecast-compatible listener URLs at a ramp rate, hold, and record time to first
//! byte, bytes per one-second window and the longest gap between reads. A listener is *starved*
//! when it receives less than a share of the stream bitrate over a sliding window or waits longer
//! than a player's buffer between reads. Large runs are split over worker processes (re-executions
//! of the current binary) that report per-second statistics as JSON lines; the parent aggregates
//! them with server samples (from `/proc` or a Prometheus URL) into a JSON file and a
//! self-contained HTML report with SVG plots. `throng bench compare` does the same for several
//! servers, each started from a scenario file, and writes one side-by-side report.
//!
//! One run has one [`mode::Mode`] (ICY listeners, HLS players, event-stream subscribers or WHEP
//! viewers), chosen once from the flags and URLs; every mode runs over the same worker
//! protocol and ends in the same report (`report.json`, `report.html`, plots, `compare`).
//!
//! Modules, bottom layer first (`layers.txt`; a module uses only its own layer or below):
//! - shared plumbing: [`mode`] (the mode and its choice), [`net`] (URLs, sockets, TLS, UDP
//!   batches), [`profile`] (what to run), [`testserver`]; [`stats`] (per-second ticks,
//!   histograms, listener counts), [`observe`] (server sampling, the server's pid, the bench's
//!   CPU, a run's metadata), [`source`] (pushing a live source);
//! - one folder per mode: [`icy`] (the listener event loop and starvation rule), [`events`]
//!   (SSE subscribers), [`hls`] (HLS players), [`whep`] (WebRTC viewers, mouth-to-ear latency);
//! - [`report`]: the one report of every mode (summary, metrics, plots, HTML, progress);
//! - [`run`](mod@run): the one plan, the one worker protocol, each mode's pipeline and
//!   `compare`.

use clap::{Args, Subcommand};

pub mod events;
pub mod hls;
pub mod icy;
pub mod mode;
pub mod net;
pub mod observe;
pub mod profile;
pub mod report;
pub mod run;
pub mod source;
pub mod stats;
pub mod testserver;
pub mod whep;

/// Arguments of `throng bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The subcommands of `throng bench`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load-test one or more listener URLs (listeners are spread round-robin over the URLs).
    #[command(after_help = EXIT_STATUS_HELP)]
    Run(Box<run::RunArgs>),
    /// Run the same profile against several servers, one after the other, from a scenario file.
    #[command(after_help = EXIT_STATUS_HELP)]
    Compare(run::compare::CompareArgs),
    /// A minimal fixed-rate streaming server (one write per listener per interval), used to
    /// calibrate the bench and by its tests.
    TestServer(testserver::TestServerArgs),
    /// Internal: one worker process of a run, of any mode (reads its mode and spec as JSON
    /// from stdin, writes one JSON line per tick to stdout).
    #[command(hide = true)]
    Worker(run::worker::WorkerArgs),
}

/// Exit status of `throng bench run` and `compare` when every run's verdict is PASS.
pub const EXIT_PASS: i32 = 0;
/// Exit status of `throng bench run` and `compare` when a run's verdict is FAIL (the reports
/// are written all the same).
pub const EXIT_FAIL: i32 = 1;
/// Exit status of `throng bench run` and `compare` when the bench could not run (bad arguments,
/// scenario or source file, a server that did not start, reports that could not be written).
pub const EXIT_ERROR: i32 = 2;

/// The exit statuses, as printed under `--help` of `run` and `compare`.
const EXIT_STATUS_HELP: &str = "Exit status: 0 when the verdict is PASS, 1 when it is FAIL \
(reports are written; in a comparison, when any server's verdict is FAIL), 2 when the bench \
could not run (bad arguments, a missing file or program, a server that did not start).";

/// Runs `throng bench` (synchronous: it builds its own threads and event loops). `run` and
/// `compare` end the process with [`EXIT_PASS`], [`EXIT_FAIL`] or [`EXIT_ERROR`] (their error
/// is printed on stderr, without a backtrace), so the bench can gate CI.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Run(a) => exit_with(run::run_command(*a)),
        BenchCommand::Compare(a) => exit_with(run::compare::compare_command(a)),
        BenchCommand::TestServer(a) => testserver::test_server_command(a),
        BenchCommand::Worker(a) => run::worker::worker_command(a),
    }
}

/// Ends the process with the exit status of a verdict (`Ok(true)` = PASS) or an error.
fn exit_with(outcome: anyhow::Result<bool>) -> ! {
    use std::io::Write as _;
    let code = match outcome {
        Ok(true) => EXIT_PASS,
        Ok(false) => {
            eprintln!("verdict: FAIL");
            EXIT_FAIL
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_ERROR
        }
    };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}
