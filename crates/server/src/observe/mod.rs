//! What the server reports about itself: Prometheus metrics (`metrics.rs`) and the access log
//! in Icecast's Combined Log Format (`access_log.rs`).

pub mod access_log;
pub mod metrics;
