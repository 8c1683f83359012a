//! What the ledger is told, as messages from the server's tasks to its writer thread: a
//! session's start ([`SessionStart`]) and end ([`SessionEnd`]), a title change ([`Play`], with
//! who set it: [`TitleSetter`]), and the constants both sides share.

use std::net::IpAddr;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// Longest time a closed session waits in memory before it is committed (1 s: the most a
/// crash can lose).
pub const COMMIT_EVERY: Duration = Duration::from_millis(1000);

/// The end reason the ledger gives a session left open by a crash (`shutdown:crashed`), in the
/// `side:why` vocabulary of `audience/end.rs`.
pub const CRASHED: &str = "shutdown:crashed";

/// Who set a title, as the play log records it (`set_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TitleSetter {
    /// The source client: inline ICY metadata, Ogg comments, a relay's upstream.
    Source,
    /// An admin request (`/admin/metadata`, `admin.cgi`).
    Admin,
    /// A file the server plays (a fallback or on-demand file, the demo mount).
    File,
}

impl TitleSetter {
    /// `source`, `admin` or `file`.
    pub fn as_str(self) -> &'static str {
        match self {
            TitleSetter::Source => "source",
            TitleSetter::Admin => "admin",
            TitleSetter::File => "file",
        }
    }
}

/// A session as it starts.
#[derive(Debug, Clone)]
pub struct SessionStart {
    /// The mount asked for.
    pub mount: String,
    /// `icy`, `hls` or `whep`.
    pub path: &'static str,
    /// A relay or edge pulling the mount (not a listener).
    pub relay: bool,
    /// `User-Agent`, if sent (already capped by the audience record).
    pub agent: Option<String>,
    /// `Referer`, if sent.
    pub referer: Option<String>,
    /// Authenticated user, if any.
    pub user: Option<String>,
    /// The client's address; stored only as `[ledger] address` says.
    pub ip: IpAddr,
}

/// A session as it ends.
#[derive(Debug, Clone)]
pub struct SessionEnd {
    /// The session's id.
    pub id: i64,
    /// The mount it was on at the end.
    pub mount: String,
    /// When it ended, Unix milliseconds.
    pub ended_ms: i64,
    /// Seconds listened (from the start to the end, on a monotonic clock).
    pub seconds: f64,
    /// Bytes sent to it, head included.
    pub bytes: u64,
    /// The end reason's `side:why` key.
    pub reason: &'static str,
}

/// A title change of a mount.
#[derive(Debug, Clone)]
pub struct Play {
    /// The mount.
    pub mount: String,
    /// When, Unix milliseconds.
    pub at_ms: i64,
    /// The title as listeners see it (`Artist - Title`, or a bare title).
    pub title: String,
    /// Who set it.
    pub set_by: TitleSetter,
    /// The mount's listeners at that moment.
    pub listeners: u64,
}

/// A message to the writer thread (sent by [`super::Ledger`] and [`super::LedgerTicket`]).
#[derive(Debug)]
pub enum Msg {
    /// A session started (id, start in Unix ms, facts).
    Start(i64, i64, SessionStart),
    /// A session ended.
    End(SessionEnd),
    /// A title changed.
    Play(Play),
    /// A session that never got under way (refused after its start was recorded): its row
    /// is removed.
    Discard(i64),
    /// Commit what is pending and fold the appended ends into their sessions, then answer
    /// (shutdown, tests).
    Flush(Sender<()>),
    /// Commit what is pending, then answer, as the writer's own clock would (the benches
    /// pace the writer with it in simulated time).
    Commit(Sender<()>),
}

/// The now in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
