//! The Throng server: Icecast-compatible source ingest, listeners, mounts, the fan-out engine,
//! and the status/admin HTTP.
//!
//! The crate is built in layers, each importing only from the layers below it (the list is in
//! `crates/server/layers.txt`, checked by `scripts/check-layers.py`; `docs/ARCHITECTURE.md`
//! walks through them):
//!
//! | layer | modules | what |
//! |---|---|---|
//! | L0 | `config`, `observe`, `net` | configuration (TOML and `icecast.xml`), metrics, access and error logs, systemd notifications, sockets, the `clients` count, filters |
//! | L1 | `mount`, `audience` | a stream: mount, registry and fallbacks, queue, chunker, feeder, ICY block, Ogg retagging, intros; the audience core: the record every listener, HLS session and WHEP viewer has, one end-reason vocabulary, the pure follower |
//! | L2 | `fanout`, `transcode` | the fan-out engine: cursor, write path, shards and their listener records; MP3 and AAC mounts to Opus for WebRTC viewers |
//! | L3 | `auth` | listener and source authentication (static, htpasswd, URL callbacks) |
//! | L4 | `ctx`, `respond`, `control` | the shared handles, the HTTP reply vocabulary, operator commands |
//! | L5 | `ingest`, `listener`, `admin`, `whep`, `whip`, `hls_http`, `event_stream` | source clients, SHOUTcast, files, relays; listeners; admin, status and APIs; WHEP; WHIP ingest; HLS over HTTP; the event stream |
//! | L6 | `connection`, `server`, `signals`, `reload`, `logs`, `upgrade` | one connection's dispatch; the server's sockets and lifecycle; signals; config reload, log reopening, binary upgrade |

mod admin;
mod alias;
mod audience;
mod auth;
mod cluster;
pub mod config;
mod connection;
mod control;
mod ctx;
mod dump_file;
mod event_stream;
mod fanout;
mod hls;
mod hls_http;
mod hooks;
mod ingest;
pub mod ledger;
mod listener;
mod logs;
mod mount;
mod net;
mod observe;
mod reload;
mod respond;
mod roster;
mod server;
mod signals;
mod transcode;
mod upgrade;
mod whep;
mod whip;
mod yp;

pub use config::Config;
pub use control::{Control, ControlHandle};
pub use ctx::ServerCtx;

/// Problems of the `[[mount]] authentication` sections of `config` that would stop a start
/// (`throng check-config`), one `key: problem` line each.
pub fn auth_problems(config: &Config) -> Vec<String> {
    auth::Authenticators::problems(config)
}
pub use audience::follow::ENDED_GRACE;
pub use audience::page::Page;
pub use audience::{AudiencePath, EndReason, ListenerRow};
/// The HLS session tokens' keyed MAC (`hls/token.rs`), public so tools and tests issue tokens
/// a server with the same `[hls] token-secret` accepts in cache-log lines.
pub use hls::token::TokenKeys;
pub use mount::live::{Mount, SourceKind};
pub use observe::error_log::{ErrorLog, ErrorLogError};
pub use observe::log_rotation::Rotation;
pub use observe::{error_log, systemd};
pub use reload::LogHook;
pub use server::{Server, ServerError};
pub use upgrade::adopt::Handover;
pub use upgrade::UpgradeError;

/// The fan-out write path's building blocks, public only for the benchmarks in
/// `crates/server/benches` (criterion and callgrind measure them without a server).
#[doc(hidden)]
pub mod bench_api {
    pub use crate::config::LagPolicy;
    pub use crate::fanout::cursor::{Cursor, SegKind};
    pub use crate::fanout::shard::decide::{visit, ListenerView, MountView};
    pub use crate::fanout::write_path::{write_due, Written, MAX_WRITE_BYTES};
    pub use crate::mount::icy_meta::IcyMeta;
    pub use crate::mount::queue::{QueueSnapshot, QueueWriter};
}
