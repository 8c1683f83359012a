//! What the server reports about itself: Prometheus metrics (`metrics.rs`), the access log in
//! Icecast's Combined Log Format (`access_log.rs`), the reopenable error-log file
//! (`error_log.rs`), systemd readiness notifications (`systemd.rs`) and the process metrics
//! (`process.rs`: CPU, memory, file descriptors).

pub mod access_log;
pub mod error_log;
pub mod log_rotation;
pub mod metrics;
pub mod process;
pub mod systemd;
