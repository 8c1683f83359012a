//! The Throng server: Icecast-compatible source ingest, listeners, mounts, the fan-out engine,
//! and the status/admin HTTP.
//!
//! Files by concept:
//! - Accepting and routing: `server.rs` (listen sockets, accept loop, shutdown),
//!   `connection.rs` (request head, dispatch, error replies), `filters.rs` (trusted proxies,
//!   deny/allow files), `rewind.rs` (hand-off to hyper).
//! - Feeding mounts: `source.rs` (source clients), `shoutcast.rs` (SHOUTcast v1 sources on
//!   port + 1), `file_source.rs` (looped files: the demo, file mounts, fallback files),
//!   `relay.rs` (streams pulled from other servers; `relay_client.rs` its pure request and
//!   answer handling, `master.rs` the master's stream-list poller),
//!   `feeder.rs` (ICY stripping, framing, garbage detection), `chunker.rs` (frames → chunks),
//!   `ogg_retag.rs` (admin title updates of Ogg Vorbis/Opus mounts as new chained streams).
//! - The fan-out core: `ring.rs` (a mount's queue of shared chunks), `cursor.rs` (a listener's
//!   position and ICY interleaving), `write_path.rs` (one coalesced writev), `shard.rs` (a thread walking its listeners; `shard/moves.rs` its listener moves), `fanout.rs`.
//! - Listeners: `listener.rs` (request checks, response head, hand-over to a shard).
//! - Authentication: `auth.rs` (decisions and notices), `auth_htpasswd.rs`, `auth_url.rs`,
//!   `auth_http.rs` (the callback HTTP client).
//! - State and reporting: `mount.rs`, `config.rs`, `status.rs`, `metrics.rs`, `access_log.rs`.
//! - Migration: `icecast_xml.rs` (an Icecast `icecast.xml` as a [`Config`]).
//! - Admin: `admin.rs` (routes), `admin_icecast.rs` (Icecast's `/admin/*`), `admin_api.rs`
//!   (JSON), `admin_auth.rs`, `admin_data.rs`, `admin_ops.rs`, `admin_xml.rs`, `admin_html.rs`,
//!   `admin_cgi.rs` (SHOUTcast metadata updates).

#![deny(missing_docs)]

pub mod access_log;
pub mod admin;
pub mod admin_api;
pub mod admin_auth;
pub mod admin_cgi;
pub mod admin_data;
pub mod admin_html;
pub mod admin_icecast;
pub mod admin_ops;
pub mod admin_xml;
pub mod auth;
pub mod auth_htpasswd;
pub mod auth_http;
pub mod auth_url;
pub mod chunker;
pub mod config;
pub mod connection;
pub mod cursor;
pub mod fanout;
pub mod feeder;
pub mod file_source;
pub mod filters;
pub mod icecast_xml;
pub mod listener;
pub mod master;
pub mod metrics;
pub mod mount;
pub mod ogg_retag;
pub mod relay;
pub mod relay_client;
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
