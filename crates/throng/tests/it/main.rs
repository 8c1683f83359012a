//! Integration tests of the `throng` binary itself.

mod azuracast;
mod bench_agents;
mod bench_events;
mod bench_gate;
mod bench_hls;
mod bench_scenario;
mod bench_whep;
mod chaos;
mod check_config;
mod deploy;
mod drain;
mod helm;
mod import;
mod ledger_crash;
mod logs;
mod netns;
mod reload;
mod report;
mod serve;
mod support;
mod tls;
mod upgrade;
