//! Integration tests of `throng bench` against small servers on loopback: the command line
//! (exit statuses, report header, scenario paths, pidfiles, source password), the CI gate
//! (thresholds, JUnit, scenarios, the live metrics scraped by Prometheus), a fixed-rate server
//! (no listener starved, every one verified), one that goes silent or slow (starved by gap, by
//! rate), refused and failing connections (counted by reason), load profiles and stages, the
//! source pusher, a run of more than 20,000 listeners over two worker processes, and HLS players
//! against the test server's HLS stream.

mod cli;
mod failures;
mod gates;
mod hls;
mod profiles;
mod scale;
mod source;
mod starvation;
mod util;
