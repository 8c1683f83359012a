//! The audience ledger (issue 23): every listening session on every path (ICY, HLS, WHEP), and
//! every title change of every mount, kept in a real database (SQLite by default, PostgreSQL for
//! a ledger a cluster shares), for listening reports and royalty reports.
//!
//! No listener ever waits on it: a session's start and end, and a title change, are messages on
//! an unbounded channel to one writer thread (`writer.rs`), which stores them in batches, one
//! transaction at least every [`COMMIT_EVERY`], so a crash loses at most the last second of
//! closed sessions. Sessions open at a crash are closed at the next start, at the server's last
//! sign of life, with the end reason [`CRASHED`].
//!
//! - `address.rs`: how client addresses are stored (`full`, `truncated`, `hashed`).
//! - `geo.rs`: countries from a MaxMind-format database.
//! - `player.rs`: the player family of a `User-Agent`.
//! - `minutes.rs`: a session's seconds in each clock minute (the rollup reports sum).
//! - `message.rs`: what the writer is sent (session start and end, title changes).
//! - `db.rs`, `schema.rs`: the two databases and the versioned schema.
//! - `writer.rs`: the writer thread; `report.rs`: the reports; `csv.rs`: their CSV forms;
//!   `request.rs`: a report request as the API and `throng report` take it.

pub mod address;
pub mod csv;
pub mod db;
pub mod geo;
pub mod health;
pub mod message;
pub mod minutes;
pub mod names;
pub mod player;
pub mod report;
pub mod request;
pub mod schema;
pub mod uniques;
pub mod writer;

use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, LedgerDatabase};

pub use message::{
    now_ms, Msg, Play, SessionEnd, SessionStart, TitleSetter, COMMIT_EVERY, CRASHED,
};

/// Errors starting the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database cannot be opened or migrated.
    #[error("ledger {db}: {source}")]
    Db {
        /// The database (password redacted).
        db: String,
        /// Why.
        source: db::DbError,
    },
    /// The country database cannot be read.
    #[error("ledger geoip: {0}")]
    Geo(String),
    /// The `database` setting is not understood.
    #[error("{0}")]
    Config(String),
    /// The writer thread cannot be started.
    #[error("ledger writer thread: {0}")]
    Thread(std::io::Error),
    /// A report asked of a database that holds no audience ledger (a missing SQLite file, or
    /// a database without the ledger's tables): nothing is created.
    #[error("no audience ledger at {0}")]
    Missing(String),
}

/// A handle on the running ledger (cheap to clone; every clone feeds the same writer).
#[derive(Debug, Clone)]
pub struct Ledger {
    tx: Sender<Msg>,
    server: Arc<str>,
    /// How the writer is doing (`health.rs`).
    health: Arc<health::LedgerHealth>,
    /// Session ids grow with time (an SQLite ledger, one server's file) rather than being
    /// random (PostgreSQL, shared by servers): [`new_session_id`].
    time_ordered_ids: bool,
}

/// This server's default name in the ledger: the machine's host name (`gethostname(2)`; the
/// configuration's `hostname` when it has none) and the port of the first listen address, so
/// servers on different machines sharing one ledger never take each other's rows for their
/// own (crash recovery closes the open sessions of its own name).
pub fn default_server_name(config: &Config) -> String {
    let port = config.listen.first().map(|a| a.port()).unwrap_or(8000);
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| config.hostname.clone());
    format!("{host}:{port}")
}

impl Ledger {
    /// Starts the ledger `config.ledger` asks for, or `None` when it has no database (or
    /// `off`). `recover` closes the sessions this server left open (a crash): true at a normal
    /// start, false when the process takes over from an older one (binary upgrade), whose
    /// open sessions are handed over.
    ///
    /// Errors: [`LedgerError`] when the database or country file cannot be opened; the server
    /// refuses to start then, so the audience record is never silently lost.
    pub fn start(config: &Config, recover: bool) -> Result<Option<Ledger>, LedgerError> {
        let Some(url) = &config.ledger.database else {
            return Ok(None);
        };
        let Some(database) = LedgerDatabase::parse(url).map_err(LedgerError::Config)? else {
            return Ok(None);
        };
        let server: Arc<str> = config
            .ledger
            .server
            .clone()
            .unwrap_or_else(|| default_server_name(config))
            .into();
        let countries = match &config.ledger.geoip {
            Some(path) => Some(geo::Countries::open(path).map_err(LedgerError::Geo)?),
            None => None,
        };
        // The writer thread opens the database itself: PostgreSQL's client runs its own
        // runtime, which must not be started from the server's async tasks. Start waits for
        // the outcome, so a database that cannot be opened refuses the start.
        let (tx, rx) = channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (address, retention, playlistlog) = (
            config.ledger.address,
            config.ledger.retention_days,
            config.ledger.playlistlog.clone(),
        );
        let (db_name, writer_server) = (database.clone(), server.clone());
        let health = Arc::new(health::LedgerHealth::default());
        let writer_health = health.clone();
        std::thread::Builder::new()
            .name("throng-ledger".into())
            .spawn(move || {
                let opened = db::Db::open(&db_name).and_then(|mut db| {
                    schema::migrate(&mut db)?;
                    Ok(db)
                });
                let db = match opened {
                    Ok(db) => db,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let mut w = writer::Writer::new(
                    db,
                    writer_server,
                    address,
                    countries,
                    retention,
                    playlistlog,
                )
                .with_reconnect(db_name, writer_health);
                if recover {
                    match w.recover(now_ms()) {
                        Ok(0) => {}
                        Ok(n) => tracing::warn!(
                            sessions = n,
                            "ledger: closed sessions left open by an earlier crash ({CRASHED})"
                        ),
                        Err(e) => tracing::error!("ledger: cannot close sessions left open: {e}"),
                    }
                }
                if let Err(e) = w.announce(now_ms()) {
                    tracing::error!("ledger: cannot record this server's start: {e}");
                }
                let _ = ready_tx.send(Ok(()));
                // After the server is told to go on: sessions starting meanwhile wait in the
                // channel and are counted after the ones read back.
                if let Err(e) = w.load_uniques(now_ms()) {
                    tracing::error!("ledger: cannot read today's listeners back: {e}");
                }
                match w.backfill_uniques() {
                    Ok(0) => {}
                    Ok(days) => tracing::info!(
                        days,
                        "ledger: unique listeners counted for days written before schema version 2"
                    ),
                    Err(e) => tracing::error!("ledger: counting earlier unique listeners: {e}"),
                }
                w.run(rx)
            })
            .map_err(LedgerError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(LedgerError::Db {
                    db: database.display(),
                    source,
                })
            }
            Err(_) => {
                return Err(LedgerError::Thread(std::io::Error::other(
                    "the ledger thread ended while opening the database",
                )))
            }
        }
        tracing::info!(database = %database.display(), %server, "audience ledger on");
        let time_ordered_ids = matches!(database, LedgerDatabase::Sqlite(_));
        Ok(Some(Ledger {
            tx,
            server,
            health,
            time_ordered_ids,
        }))
    }

    /// This server's name in the ledger.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// How the writer is doing: messages pending, failed commits, the last commit.
    pub fn health(&self) -> &health::LedgerHealth {
        &self.health
    }

    /// Records a session's start, now; the ticket it returns records its end.
    pub fn open(&self, start: SessionStart) -> LedgerTicket {
        self.open_at(start, now_ms())
    }

    /// Records a session's start at `started_ms` (Unix milliseconds; an HLS session is
    /// recorded when it fetches its first segment, with the time of its first playlist
    /// request); the ticket it returns records its end.
    pub fn open_at(&self, start: SessionStart, started_ms: i64) -> LedgerTicket {
        let id = new_session_id(started_ms, self.time_ordered_ids);
        self.health.pending.inc();
        let _ = self.tx.send(Msg::Start(id, started_ms, start));
        LedgerTicket {
            id,
            started_ms,
            ledger: Some(self.clone()),
        }
    }

    /// The ticket of a session opened by an earlier process (a binary upgrade handed it
    /// over): `id` and its start, Unix milliseconds.
    pub fn adopt(&self, id: i64, started_ms: i64) -> LedgerTicket {
        LedgerTicket {
            id,
            started_ms,
            ledger: Some(self.clone()),
        }
    }

    /// Records a title change.
    pub fn play(&self, play: Play) {
        let _ = self.tx.send(Msg::Play(play));
    }

    /// Commits everything sent so far; waits at most `timeout` (shutdown, tests).
    pub fn flush(&self, timeout: Duration) -> bool {
        let (tx, rx) = channel();
        if self.tx.send(Msg::Flush(tx)).is_err() {
            return false;
        }
        rx.recv_timeout(timeout).is_ok()
    }
}

/// One open session's link to the ledger, kept by its audience record; [`LedgerTicket::end`]
/// records the end. A ticket dropped without an end (a viewer refused after its start was
/// recorded, a listener the fan-out could not take) removes the session's row: it never got
/// under way. A binary upgrade hands the session over with [`LedgerTicket::hand_over`].
#[derive(Debug)]
pub struct LedgerTicket {
    /// The session id (the `id` column; [`new_session_id`]).
    pub id: i64,
    /// When it started, Unix milliseconds.
    pub started_ms: i64,
    /// `None` once ended or handed over.
    ledger: Option<Ledger>,
}

impl Drop for LedgerTicket {
    fn drop(&mut self) {
        if let Some(l) = self.ledger.take() {
            let _ = l.tx.send(Msg::Discard(self.id));
        }
    }
}

impl LedgerTicket {
    /// Gives the session to the process taking over (binary upgrade): returns its id and
    /// start (Unix ms) for [`Ledger::adopt`] there; this process records nothing more.
    pub fn hand_over(mut self) -> (i64, i64) {
        self.ledger = None;
        (self.id, self.started_ms)
    }

    /// Records the end: on `mount`, `bytes` sent, for `reason` (a `side:why` key), after
    /// `seconds` of listening (the session ends that long after its start).
    pub fn end(mut self, mount: &str, bytes: u64, reason: &'static str, seconds: f64) {
        let Some(ledger) = self.ledger.take() else {
            return;
        };
        ledger.health.pending.inc();
        let _ = ledger.tx.send(Msg::End(SessionEnd {
            id: self.id,
            mount: mount.to_owned(),
            ended_ms: self.started_ms + (seconds * 1000.0) as i64,
            seconds,
            bytes,
            reason,
        }));
    }
}

/// Opens the ledger database of `config` for reading reports (the API opens one per request;
/// `throng report` one per run, with no server running).
///
/// Never creates a ledger: a report of a mistyped path or database would otherwise print
/// zero totals from a new, empty one.
///
/// Errors: [`LedgerError::Config`] without a database; [`LedgerError::Missing`] when the
/// SQLite file does not exist or the database has no ledger (no `ledger_meta` schema
/// version); [`LedgerError::Db`] when it cannot be opened or its schema is unknown.
pub fn open_for_reports(config: &Config) -> Result<db::Db, LedgerError> {
    let url = config.ledger.database.as_deref().unwrap_or("off");
    let Some(database) = LedgerDatabase::parse(url).map_err(LedgerError::Config)? else {
        return Err(LedgerError::Config(
            "no audience ledger: set [ledger] database".into(),
        ));
    };
    if let LedgerDatabase::Sqlite(path) = &database {
        // `Db::open` would create the file (and its directory), and its pragmas write to it;
        // a read-only connection creates nothing.
        if !db::sqlite_holds_ledger(path) {
            return Err(LedgerError::Missing(database.display()));
        }
    }
    let mut db = db::Db::open(&database).map_err(|source| LedgerError::Db {
        db: database.display(),
        source,
    })?;
    let version = db.query(
        "SELECT value FROM ledger_meta WHERE key = $1",
        &[db::Val::from("schema_version")],
    );
    if !version.is_ok_and(|rows| !rows.is_empty()) {
        return Err(LedgerError::Missing(database.display()));
    }
    schema::migrate(&mut db).map_err(|source| LedgerError::Db {
        db: database.display(),
        source,
    })?;
    Ok(db)
}

/// A new session id (positive, 63 bits) for a session starting at `started_ms` (Unix
/// milliseconds).
///
/// `time_ordered` (an SQLite ledger, one server's file): the start in the high 43 bits and a
/// per-process sequence in the low 20 (`started_ms << 20 | seq`, good until the year 2248),
/// so a start appends to the primary-key index instead of dirtying a random leaf of it (the
/// pages a commit writes are most of the ledger's cost). Unique within a process up to 2^20
/// sessions in one millisecond; the sequence starts at random, so a process taking over in a
/// binary upgrade does not repeat its predecessor's ids.
///
/// Otherwise (PostgreSQL, shared by the servers of a cluster): 63 random bits, so no two
/// servers' ids collide (a time-ordered id with 20 spare bits would, a few times a day in a
/// busy cluster).
pub fn new_session_id(started_ms: i64, time_ordered: bool) -> i64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    if !time_ordered {
        return (rand::random::<u64>() >> 1) as i64;
    }
    static SEQ: std::sync::OnceLock<AtomicU64> = std::sync::OnceLock::new();
    let seq = SEQ
        .get_or_init(|| AtomicU64::new(rand::random::<u64>()))
        .fetch_add(1, Ordering::Relaxed);
    (started_ms.max(0) << 20) | (seq & 0xF_FFFF) as i64
}
