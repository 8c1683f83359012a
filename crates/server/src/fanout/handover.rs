//! A listener carried across a binary upgrade (SIGUSR2): its request facts, counters and
//! [`CursorState`] (stream position, unsent prefix, ICY interval and a metadata block cut by a
//! partial write), next to its socket. The shards give their listeners up as
//! [`ExportedListener`]s and take them back as [`AdoptedListener`]s; in between they are plain
//! values the upgrade code (`upgrade/`) sends to the new process.

use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::fanout::cursor::CursorState;
use crate::fanout::seal::SealExport;
use crate::mount::live::Mount;
use crate::net::clients::ClientSlot;

/// A listener as carried across the upgrade (without its socket).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListenerState {
    /// Listener id (ids continue in the new process, so `killclient` ids stay valid).
    pub id: u64,
    /// Client address.
    pub ip: IpAddr,
    /// Request line as logged.
    pub request_line: String,
    /// `User-Agent`, if sent.
    pub agent: Option<String>,
    /// `Referer`, if sent.
    pub referer: Option<String>,
    /// Authenticated user, if any.
    pub user: Option<String>,
    /// Milliseconds since the request arrived.
    pub connected_ms: u64,
    /// Milliseconds left before it must be disconnected, if limited.
    pub deadline_ms: Option<u64>,
    /// The mount it asked for.
    pub requested_mount: String,
    /// The old process's id of the mount it is on (see `mount/handover.rs`).
    pub mount_id: u64,
    /// Bytes sent so far, head included.
    pub sent: u64,
    /// Its place in the stream.
    pub cursor: CursorState,
    /// A downstream relay's connection, visited at every tick (see `NewListener::relay`).
    #[serde(default)]
    pub relay: bool,
    /// Its session in the audience ledger: id and start (Unix ms), so the new process
    /// completes the same row.
    #[serde(default)]
    pub ledger_session: Option<(i64, i64)>,
}

/// A listener a shard gave up: its socket (blocking mode unspecified) and its state.
#[derive(Debug)]
pub struct ExportedListener {
    /// The connection.
    pub stream: std::net::TcpStream,
    /// The mount it was on.
    pub mount: Arc<Mount>,
    /// Everything else.
    pub state: ListenerState,
    /// A TLS listener's sealing state.
    pub tls: Option<SealExport>,
}

/// A listener handed to a shard of the new process.
#[derive(Debug)]
pub struct AdoptedListener {
    /// The connection (non-blocking).
    pub stream: std::net::TcpStream,
    /// The rebuilt mount it is on (a listener slot is taken by the shard).
    pub mount: Arc<Mount>,
    /// Its state.
    pub state: ListenerState,
    /// Its unit of the `clients` count.
    pub client_slot: ClientSlot,
    /// A TLS listener's sealing state.
    pub tls: Option<SealExport>,
}
