//! `throng bench`: a load generator that proves every listener hears the stream, not how many
//! connect.
//!
//! Simulated listeners (a `mio` event loop per worker, a few hundred bytes of state each) follow
//! k6-style stages in named audience groups (ICY listeners, HLS players, WebRTC viewers,
//! event-stream subscribers, several in one run), and every one's media is verified as it
//! arrives: MP3/ADTS frames chained header to header, Ogg pages by CRC and sequence, ICY
//! metadata blocks by metaint, HLS segments by sequence and timestamps, RTP packets by sequence
//! and timestamp. What counts is media time, not bytes: a listener is *starved* when the media it
//! gets over a window falls below a share of real time, or it waits longer than a player's
//! buffer; *corrupt* when its frames do not chain. Large runs are split over worker processes
//! (re-executions of the current binary) and, with agents, over hosts; every level sends up the
//! same mergeable per-second summary (exact HDR histograms, exact counts), so the controller's
//! cost is flat in listeners. The verdict is k6-style thresholds (`ttfb.p99<500ms`); the run is
//! watched live (progress lines, `/metrics` for Prometheus, an NDJSON timeline) and reported as
//! JSON, HTML (the verdict first), SVG plots and JUnit XML. `throng bench compare` runs the same
//! profile against several servers it starts, with ratios that say which is better.
//!
//! Modules, bottom layer first (`layers.txt`; a module uses only its own layer or below):
//! - shared plumbing: [`mode`], [`net`] (URLs, sockets, TLS, UDP batches), [`profile`] (stages,
//!   execution segments, behaviour and rules, the run's clock), [`testserver`]; [`stats`]
//!   (exact histograms, the mergeable summary, the per-second merge), [`verify`] (the media
//!   checks), [`observe`] (server sampling, the bench's CPU, a run's metadata), [`source`];
//! - one folder per mode: [`icy`], [`events`], [`hls`], [`whep`];
//! - [`scenario`] (scenario files, the one plan) and [`report`] (summaries, thresholds, the
//!   verdict, HTML, JUnit, plots);
//! - [`run`](mod@run): the run on this machine (workers, the run loop, live outputs) and
//!   `compare`;
//! - [`dist`]: the bench across machines (agents, controller, one clock).

use clap::{Args, Subcommand};

pub mod dist;
pub mod events;
pub mod hls;
pub mod icy;
pub mod mode;
pub mod net;
pub mod observe;
pub mod profile;
pub mod report;
pub mod run;
pub mod scenario;
pub mod source;
pub mod stats;
pub mod testserver;
pub mod verify;
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
    /// Run a bench agent: wait for a controller (`bench run --agents`) and run its share of
    /// the load on this host.
    #[command(after_help = crate::dist::agent::AGENT_HELP)]
    Agent(dist::agent::AgentArgs),
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
        BenchCommand::Agent(a) => dist::agent::agent_command(a),
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
