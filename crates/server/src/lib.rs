//! The Throng server: Icecast-compatible source ingest, listeners, mounts, the fan-out engine,
//! and the status/admin HTTP.
//!
//! Files by concept:
//! - Accepting and routing: `server.rs` (listen sockets, accept loop, shutdown),
//!   `connection.rs` (request head, dispatch, error replies), `filters.rs` (trusted proxies,
//!   deny/allow files), `rewind.rs` (hand-off to hyper).
//! - Feeding mounts: `source.rs` (source clients), `shoutcast.rs` (SHOUTcast v1 sources on
//!   port + 1), `file_source.rs` (the looped demo file),
//!   `feeder.rs` (ICY stripping, framing, garbage detection), `chunker.rs` (frames → chunks).
//! - The fan-out core: `ring.rs` (a mount's queue of shared chunks), `cursor.rs` (a listener's
//!   position and ICY interleaving), `write_path.rs` (one coalesced writev), `shard.rs` (a thread walking its listeners), `fanout.rs`.
//! - Listeners: `listener.rs` (request checks, response head, hand-over to a shard).
//! - State and reporting: `mount.rs`, `config.rs`, `status.rs`, `admin.rs`, `admin_cgi.rs`
//!   (SHOUTcast metadata updates), `metrics.rs`,
//!   `access_log.rs`.

#![deny(missing_docs)]

pub mod access_log;
pub mod admin;
pub mod admin_cgi;
pub mod auth;
pub mod chunker;
pub mod config;
pub mod connection;
pub mod cursor;
pub mod fanout;
pub mod feeder;
pub mod file_source;
pub mod filters;
pub mod listener;
pub mod metrics;
pub mod mount;
pub mod rewind;
pub mod ring;
pub mod server;
pub mod shard;
pub mod shoutcast;
pub mod source;
pub mod status;
pub mod write_path;

pub use config::Config;
pub use server::{Server, ServerError};
