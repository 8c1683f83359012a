//! The ledger's writer thread: it owns the database connection, turns session starts and ends
//! and title changes into rows, and commits them in batches (at least every
//! [`super::COMMIT_EVERY`], or every [`MAX_BATCH`] messages), recording this server's last sign
//! of life with each commit. A session's end is appended to `session_ends` and folded into
//! its row once a minute ([`FOLD_EVERY`]), on a flush (shutdown) and at the next start; once an
//! hour, the ends of servers that stopped are folded too. Once an hour it deletes rows older
//! than `retention-days`. Listeners never wait on it.
//!
//! **Nothing given is dropped** (issue 42): a batch whose commit fails (a PostgreSQL restart, a
//! full disk) is rolled back, and the writer's own state with it (the open sessions it tracks,
//! the rollups, the day salts, the play-log lines), and the same batch is tried again with a
//! growing pause ([`RETRY_FIRST`] doubling to [`RETRY_MAX`]), reconnecting first when the
//! connection is gone; messages that arrive meanwhile wait in memory behind it, in order. One
//! WARN line when writing stops, one INFO line with the counts when it works again;
//! `health.rs` counts it all for `/metrics` and `/healthz/ready`.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::address::{day_of, new_salt, stored_address, DAY_MS};
use super::db::{Db, DbError, Dialect, Val};
use super::geo::Countries;
use super::message::{now_ms, Msg, Play, SessionEnd, SessionStart, COMMIT_EVERY, CRASHED};
use super::minutes::split_by_minute;
use super::names::Names;
use super::player::player_of;
use super::schema;
use super::uniques::{Uniques, DAY_S, HOUR_S};
use crate::config::AddressPolicy;

/// Most messages applied in one transaction.
pub const MAX_BATCH: usize = 5_000;

/// How often appended ends are folded into their sessions' rows ([`Writer::fold`]): every
/// minute of the clock, and whenever the unfolded ends span a minute.
pub const FOLD_EVERY: Duration = Duration::from_secs(60);

/// How often the writer looks at its channel between commits (the most a flush waits).
const WAKE_EVERY: Duration = Duration::from_millis(100);

/// How often rows past the retention are deleted.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// The pause after the first failed commit before the batch is tried again; it doubles with
/// each failure, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(250);

/// The longest pause between two tries of a failed batch.
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// Writing that has stopped: since when, how many tries failed, the pause before the next.
#[derive(Debug)]
struct Stopped {
    since: Instant,
    failures: u64,
    next: Instant,
    pause: Duration,
}

/// What the writer remembers of an open session until it ends (for the rollup), its names
/// shared ([`Names`]).
#[derive(Debug, Clone)]
struct OpenRow {
    mount: Arc<str>,
    path: Arc<str>,
    relay: bool,
    started_ms: i64,
    /// Empty when unknown.
    country: Arc<str>,
    player: Arc<str>,
}

/// The writer: database, policies and the open sessions it has seen start.
pub struct Writer {
    db: Db,
    server: Arc<str>,
    policy: AddressPolicy,
    countries: Option<Countries>,
    retention_days: u32,
    playlistlog: Option<PathBuf>,
    salts: HashMap<i64, String>,
    open: foldhash::HashMap<i64, OpenRow>,
    /// The names the open sessions and the rollups' keys share.
    names: Names,
    /// The batch's rollup: listening seconds and sessions by (minute, mount, path, country,
    /// player), written once per batch ([`Writer::flush_rollup`]).
    rollup: foldhash::HashMap<RollupKey, (f64, i64)>,
    /// The end time (Unix ms) of the oldest end not yet folded, and of the newest: ends are
    /// folded once they span [`FOLD_EVERY`] of session time (or of the clock).
    unfolded: Option<(i64, i64)>,
    /// The listeners seen this hour and day ([`Uniques`]), and the batch's new ones per
    /// counter of `audience_uniques`.
    uniques: Uniques,
    unique_rollup: foldhash::HashMap<UniqueKey, i64>,
    /// What the batch being applied changed in `open` (each id and its row before), undone
    /// when its transaction fails.
    journal: Vec<(i64, Option<OpenRow>)>,
    /// Play-log lines of the batch, appended to `playlistlog` once it is committed.
    playlog_lines: Vec<String>,
    /// The database to reconnect to when the connection is gone (`None`: never reconnect, as
    /// the tests' in-memory databases).
    reopen: Option<crate::config::LedgerDatabase>,
    /// Counts for `/metrics` and `/healthz/ready` (`health.rs`).
    health: Arc<super::health::LedgerHealth>,
}

/// A row of `audience_minutes` for this server: minute, mount, path, country, player.
type RollupKey = (i64, Arc<str>, Arc<str>, Arc<str>, Arc<str>);

/// A row of `audience_uniques` for this server: span (s), period start (Unix s), mount (empty:
/// all mounts), path, country (empty: unknown), player.
type UniqueKey = (i64, i64, Arc<str>, Arc<str>, Arc<str>, Arc<str>);

impl Writer {
    /// A writer on `db` for `server`.
    pub fn new(
        db: Db,
        server: Arc<str>,
        policy: AddressPolicy,
        countries: Option<Countries>,
        retention_days: u32,
        playlistlog: Option<PathBuf>,
    ) -> Writer {
        Writer {
            db,
            server,
            policy,
            countries,
            retention_days,
            playlistlog,
            salts: HashMap::new(),
            open: Default::default(),
            names: Names::new(),
            rollup: Default::default(),
            unfolded: None,
            uniques: Uniques::new(),
            unique_rollup: Default::default(),
            journal: Vec::new(),
            playlog_lines: Vec::new(),
            reopen: None,
            health: Arc::default(),
        }
    }

    /// The writer reconnects to `db` when its connection is gone, and reports into `health`.
    pub fn with_reconnect(
        mut self,
        db: crate::config::LedgerDatabase,
        health: Arc<super::health::LedgerHealth>,
    ) -> Writer {
        self.reopen = Some(db);
        self.health = health;
        self
    }

    /// Closes this server's sessions still open in the database (a crash left them), ending
    /// them at the server's last recorded sign of life with [`CRASHED`]; returns how many.
    ///
    /// Errors: the database's.
    pub fn recover(&mut self, now: i64) -> Result<usize, DbError> {
        let seen = self
            .db
            .query(
                "SELECT seen_ms FROM ledger_servers WHERE server = $1",
                &[Val::from(&*self.server)],
            )?
            .first()
            .map(|r| r[0].int())
            .unwrap_or(now);
        self.db.batch("BEGIN")?;
        let open = match self.fold().and_then(|()| {
            self.db.query(
                "SELECT id, started_ms FROM sessions WHERE server = $1 AND ended_ms IS NULL",
                &[Val::from(&*self.server)],
            )
        }) {
            Ok(open) => open,
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                return Err(e);
            }
        };
        let closed = (|| {
            for row in &open {
                let (id, started) = (row[0].int(), row[1].int());
                let end = seen.max(started);
                self.end(&SessionEnd {
                    id,
                    mount: String::new(),
                    ended_ms: end,
                    seconds: (end - started) as f64 / 1000.0,
                    bytes: 0,
                    reason: CRASHED,
                })?;
            }
            self.flush_rollup()?;
            self.fold()
        })();
        if let Err(e) = closed {
            let _ = self.db.batch("ROLLBACK");
            self.rollup.clear();
            return Err(e);
        }
        self.db.batch("COMMIT")?;
        self.rollup.clear();
        self.unique_rollup.clear();
        Ok(open.len())
    }

    /// Remembers the listeners this server already counted today (and yesterday), from its
    /// sessions, so a restart does not count them again; returns how many sessions it read.
    ///
    /// Errors: the database's.
    pub fn load_uniques(&mut self, now: i64) -> Result<usize, DbError> {
        let since = (now.div_euclid(1000).div_euclid(DAY_S) - 1) * DAY_S * 1000;
        let mut read = 0;
        let uniques = &mut self.uniques;
        self.db.scan(
            "SELECT started_ms, mount, address FROM sessions
             WHERE started_ms >= $1 AND relay = 0 AND server = $2 ORDER BY started_ms",
            &[Val::Int(since), Val::from(&*self.server)],
            |r| {
                read += 1;
                uniques.remember(
                    r[0].int(),
                    &r[1].text().unwrap_or_default(),
                    &r[2].text().unwrap_or_default(),
                );
            },
        )?;
        Ok(read)
    }

    /// Counts the sessions of earlier schema versions into `audience_uniques`, a UTC day per
    /// transaction ([`schema::BACKFILL_KEY`]); returns the days counted here. A day another
    /// server claimed first is left to it.
    ///
    /// Errors: the database's.
    pub fn backfill_uniques(&mut self) -> Result<u32, DbError> {
        let mut days = 0;
        loop {
            self.db.batch("BEGIN")?;
            let step = (|| {
                let Some(value) = self
                    .db
                    .query(
                        "SELECT value FROM ledger_meta WHERE key = $1",
                        &[Val::from(schema::BACKFILL_KEY)],
                    )?
                    .first()
                    .and_then(|r| r[0].text())
                else {
                    return Ok(false);
                };
                let mut parts = value.split(' ').map(|v| v.parse::<i64>().unwrap_or(0));
                let (from, until) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
                if from >= until {
                    self.db.exec(
                        "DELETE FROM ledger_meta WHERE key = $1",
                        &[Val::from(schema::BACKFILL_KEY)],
                    )?;
                    return Ok(false);
                }
                let day_end = (from.div_euclid(DAY_S * 1000) + 1) * DAY_S * 1000;
                let to = day_end.min(until);
                let claimed = self.db.exec(
                    "UPDATE ledger_meta SET value = $3 WHERE key = $1 AND value = $2",
                    &[
                        Val::from(schema::BACKFILL_KEY),
                        Val::from(value.as_str()),
                        Val::from(format!("{to} {until}")),
                    ],
                )?;
                if claimed == 1 {
                    self.db
                        .exec(schema::BACKFILL_UNIQUES, &[Val::Int(from), Val::Int(to)])?;
                    days += 1;
                }
                Ok(true)
            })();
            match step {
                Ok(more) => {
                    self.db.batch("COMMIT")?;
                    if !more {
                        return Ok(days);
                    }
                }
                Err(e) => {
                    let _ = self.db.batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
    }

    /// Records this server's start (and first sign of life) at `now`.
    ///
    /// Errors: the database's.
    pub fn announce(&mut self, now: i64) -> Result<(), DbError> {
        self.db.exec(
            "INSERT INTO ledger_servers (server, started_ms, seen_ms) VALUES ($1, $2, $2)
             ON CONFLICT (server) DO UPDATE SET started_ms = excluded.started_ms,
             seen_ms = excluded.seen_ms",
            &[Val::from(&*self.server), Val::Int(now)],
        )?;
        Ok(())
    }

    /// Runs until every sender is gone: batches messages, commits them, answers flushes.
    pub fn run(mut self, rx: Receiver<Msg>) {
        let mut pending: Vec<Msg> = Vec::new();
        let mut due = Instant::now() + COMMIT_EVERY;
        let mut next_retention = Instant::now();
        let mut next_fold = Instant::now() + FOLD_EVERY;
        let mut stopped: Option<Stopped> = None;
        loop {
            // Take what has come; a flush (or commit request) ends the take.
            let (mut gone, mut flush, mut fold) = (false, None, false);
            while pending.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(Msg::Flush(reply)) => {
                        (flush, fold) = (Some(reply), true);
                        break;
                    }
                    Ok(Msg::Commit(reply)) => {
                        flush = Some(reply);
                        break;
                    }
                    Ok(m) => pending.push(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        (gone, fold) = (true, true);
                        break;
                    }
                }
            }
            let now = Instant::now();
            // While writing has stopped, the batch waits for its next try (a flush or the
            // end tries at once).
            let due_now = match &stopped {
                Some(s) => now >= s.next,
                None => pending.len() >= MAX_BATCH || now >= due,
            };
            if flush.is_none() && !gone && !due_now {
                // Nothing to do before the commit is due: sleep a slice. The thread wakes
                // about ten times a second, not once per message (two per session).
                let until = stopped.as_ref().map_or(due, |s| s.next);
                std::thread::sleep(until.saturating_duration_since(now).min(WAKE_EVERY));
                continue;
            }
            // A flush (shutdown, tests) folds too, so a stopped server leaves no end behind.
            let fold = fold || Instant::now() >= next_fold;
            let sessions = pending
                .iter()
                .filter(|m| matches!(m, Msg::Start(..) | Msg::End(_)))
                .count();
            let outcome = self
                .reconnect()
                .and_then(|()| self.commit(&mut pending, fold));
            match outcome {
                Ok(()) => {
                    if fold {
                        next_fold = Instant::now() + FOLD_EVERY;
                    }
                    self.health.committed(now_ms(), sessions);
                    if let Some(s) = stopped.take() {
                        tracing::info!(
                            failed_tries = s.failures,
                            messages = sessions,
                            "ledger: writing again after {:.1} s; every session kept meanwhile is committed",
                            s.since.elapsed().as_secs_f64()
                        );
                    }
                }
                Err(e) => {
                    self.health.failed();
                    match &mut stopped {
                        None => {
                            tracing::warn!(
                                "ledger: writing stopped: {e}; sessions are kept in memory and \
                                 written once the database answers (retrying)"
                            );
                            stopped = Some(Stopped {
                                since: Instant::now(),
                                failures: 1,
                                next: Instant::now() + RETRY_FIRST,
                                pause: RETRY_FIRST,
                            });
                        }
                        Some(s) => {
                            s.failures += 1;
                            s.pause = (s.pause * 2).min(RETRY_MAX);
                            s.next = Instant::now() + s.pause;
                            tracing::debug!("ledger: still not writing: {e}");
                        }
                    }
                    if gone {
                        tracing::error!(
                            messages = pending.len(),
                            "ledger: the server stops with sessions not written: {e}"
                        );
                    }
                }
            }
            due = Instant::now() + COMMIT_EVERY;
            if let Some(reply) = flush {
                let _ = reply.send(());
            }
            if Instant::now() >= next_retention {
                next_retention = Instant::now() + RETENTION_EVERY;
                if let Err(e) = self.fold_orphans(now_ms()) {
                    tracing::error!("ledger: folding stopped servers' ends: {e}");
                }
                if self.retention_days > 0 {
                    if let Err(e) = self.expire(now_ms()) {
                        tracing::error!("ledger: retention: {e}");
                    }
                }
            }
            if gone {
                return;
            }
        }
    }

    /// Reconnects when the connection is gone (a PostgreSQL server restarted or closed it).
    ///
    /// Errors: the database's, when it cannot be reached yet.
    fn reconnect(&mut self) -> Result<(), DbError> {
        let Some(db) = &self.reopen else {
            return Ok(());
        };
        if self.db.is_broken() {
            self.db = Db::open(db)?;
            tracing::info!("ledger: reconnected to {}", db.display());
        }
        Ok(())
    }

    /// Applies `pending` in one transaction, with this server's sign of life; `fold` also
    /// folds the appended ends into their sessions. Committed, `pending` is emptied; when the
    /// transaction fails, `pending` is left as it was and so is the writer (every change the
    /// batch made to its state is undone), so the same batch can be tried again.
    fn commit(&mut self, pending: &mut Vec<Msg>, fold: bool) -> Result<(), DbError> {
        let unfolded = self.unfolded;
        self.journal.clear();
        self.playlog_lines.clear();
        let applied = self
            .db
            .batch("BEGIN")
            .and_then(|()| self.apply(pending, fold));
        let committed = applied.and_then(|()| self.db.batch("COMMIT"));
        match committed {
            Ok(()) => {
                pending.clear();
                self.journal.clear();
                self.rollup.clear();
                self.unique_rollup.clear();
                self.write_playlog();
                Ok(())
            }
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                // Undone: the open sessions as they were, the minutes (recomputed by the next
                // try), the salts (the rolled-back row may not exist), the fold window. The
                // batch's unique listeners stay counted in `unique_rollup`: `uniques` has seen
                // them, so the next try would not count them again.
                for (id, before) in self.journal.drain(..).rev() {
                    match before {
                        Some(row) => {
                            self.open.insert(id, row);
                        }
                        None => {
                            self.open.remove(&id);
                        }
                    }
                }
                self.rollup.clear();
                self.salts.clear();
                self.playlog_lines.clear();
                self.unfolded = unfolded;
                Err(e)
            }
        }
    }

    /// Appends the committed batch's play-log lines to `playlistlog`.
    fn write_playlog(&mut self) {
        let Some(path) = &self.playlistlog else {
            self.playlog_lines.clear();
            return;
        };
        if self.playlog_lines.is_empty() {
            return;
        }
        let text: String = self.playlog_lines.drain(..).collect();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), "playlistlog: {e}");
        }
    }

    /// The statements of one batch, inside the caller's transaction.
    fn apply(&mut self, batch: &[Msg], fold: bool) -> Result<(), DbError> {
        {
            for m in batch {
                match m {
                    Msg::Start(id, at, s) => self.start(*id, *at, s)?,
                    Msg::End(e) => self.end(e)?,
                    Msg::Play(p) => self.play(p)?,
                    Msg::Discard(id) => {
                        let id = *id;
                        if let Some(row) = self.open.remove(&id) {
                            self.journal.push((id, Some(row)));
                        }
                        self.db.exec(
                            "DELETE FROM sessions WHERE id = $1 AND server = $2
                             AND ended_ms IS NULL",
                            &[Val::Int(id), Val::from(&*self.server)],
                        )?;
                    }
                    Msg::Flush(_) | Msg::Commit(_) => {}
                }
            }
            self.flush_rollup()?;
            let spanned = self
                .unfolded
                .is_some_and(|(first, last)| last - first >= FOLD_EVERY.as_millis() as i64);
            if fold || spanned {
                self.fold()?;
            }
            self.db.exec(
                "UPDATE ledger_servers SET seen_ms = $2 WHERE server = $1",
                &[Val::from(&*self.server), Val::Int(now_ms())],
            )?;
            Ok(())
        }
    }

    /// The salt of `day` (created and shared through `ledger_salts` on first use).
    fn salt(&mut self, day: i64) -> Result<String, DbError> {
        if let Some(s) = self.salts.get(&day) {
            return Ok(s.clone());
        }
        self.db.exec(
            "INSERT INTO ledger_salts (day, salt) VALUES ($1, $2) ON CONFLICT (day) DO NOTHING",
            &[Val::Int(day), Val::from(new_salt())],
        )?;
        let salt = self
            .db
            .query(
                "SELECT salt FROM ledger_salts WHERE day = $1",
                &[Val::Int(day)],
            )?
            .first()
            .and_then(|r| r[0].text())
            .unwrap_or_default();
        self.salts.retain(|d, _| *d >= day - 1);
        self.salts.insert(day, salt.clone());
        Ok(salt)
    }

    fn address(&mut self, ip: IpAddr, at_ms: i64) -> Result<String, DbError> {
        let salt = match self.policy {
            AddressPolicy::Hashed => self.salt(day_of(at_ms))?,
            _ => String::new(),
        };
        Ok(stored_address(self.policy, ip, salt.as_bytes()))
    }

    fn start(&mut self, id: i64, at: i64, s: &SessionStart) -> Result<(), DbError> {
        let address = self.address(s.ip, at)?;
        let country = self.countries.as_ref().and_then(|c| c.country(s.ip));
        let player = self.names.get(&player_of(s.agent.as_deref()));
        let inserted = self.db.exec(
            "INSERT INTO sessions (id, server, mount, path, relay, started_ms, agent, player,
             referer, username, address, country)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT DO NOTHING",
            &[
                Val::Int(id),
                Val::from(&*self.server),
                Val::from(s.mount.as_str()),
                Val::from(s.path),
                Val::Int(s.relay.into()),
                Val::Int(at),
                Val::from(s.agent.clone()),
                Val::from(&*player),
                Val::from(s.referer.clone()),
                Val::from(s.user.clone()),
                Val::from(address.as_str()),
                Val::from(country.clone()),
            ],
        )?;
        if inserted == 0 {
            tracing::warn!(id, mount = %s.mount, "ledger: a session id is taken; this start is not recorded");
            return Ok(());
        }
        let row = OpenRow {
            mount: self.names.get(&s.mount),
            path: self.names.get(s.path),
            relay: s.relay,
            started_ms: at,
            country: self.names.get(country.as_deref().unwrap_or("")),
            player,
        };
        if !s.relay {
            let all = self.names.get("");
            for c in self.uniques.arrive(at, &s.mount, &address) {
                let mount = if c.per_mount { &row.mount } else { &all };
                let key = (
                    c.span_s,
                    c.at_s,
                    mount.clone(),
                    row.path.clone(),
                    row.country.clone(),
                    row.player.clone(),
                );
                *self.unique_rollup.entry(key).or_default() += 1;
            }
        }
        let before = self.open.insert(id, row);
        self.journal.push((id, before));
        Ok(())
    }

    /// Completes a session's row and adds it to the rollup (listeners only). An empty `mount`
    /// keeps the row's own.
    fn end(&mut self, e: &SessionEnd) -> Result<(), DbError> {
        let row = match self.open.remove(&e.id) {
            Some(r) => {
                self.journal.push((e.id, Some(r.clone())));
                Some(r)
            }
            None => self.stored_open_row(e.id)?,
        };
        let Some(row) = row else {
            tracing::debug!(id = e.id, "ledger: end of a session never started here");
            return Ok(());
        };
        // Bytes are unknown (-1, stored as NULL) for a session a crash left open.
        let bytes = if e.reason == CRASHED {
            -1
        } else {
            e.bytes.min(i64::MAX as u64) as i64
        };
        // The mount is stored only when the session moved (a fallback, a move): a smaller
        // append, and the fold keeps the row's own.
        let moved = !e.mount.is_empty() && e.mount != *row.mount;
        let mount = moved.then(|| e.mount.clone());
        // Appended, folded into the session's row within a minute ([`Writer::fold`]).
        self.db.exec(
            "INSERT INTO session_ends (server, id, mount, ended_ms, seconds, bytes, end_reason)
             VALUES ($1, $2, $3, $4, $5, CASE WHEN CAST($6 AS BIGINT) < 0 THEN NULL
             ELSE CAST($6 AS BIGINT) END, $7)",
            &[
                Val::from(&*self.server),
                Val::Int(e.id),
                Val::from(mount),
                Val::Int(e.ended_ms),
                Val::Float(e.seconds),
                Val::Int(bytes),
                Val::from(e.reason),
            ],
        )?;
        self.unfolded = Some(match self.unfolded {
            Some((first, last)) => (first.min(e.ended_ms), last.max(e.ended_ms)),
            None => (e.ended_ms, e.ended_ms),
        });
        if row.relay {
            return Ok(());
        }
        let mount = if moved {
            self.names.get(&e.mount)
        } else {
            row.mount.clone()
        };
        let started = row.started_ms;
        for (i, (minute, secs)) in split_by_minute(started, e.ended_ms.max(started + 1))
            .into_iter()
            .enumerate()
        {
            let key = (
                minute,
                mount.clone(),
                row.path.clone(),
                row.country.clone(),
                row.player.clone(),
            );
            let add = self.rollup.entry(key).or_default();
            add.0 += secs;
            add.1 += i64::from(i == 0);
        }
        Ok(())
    }

    /// Adds the batch's rollup to `audience_minutes`: one upsert per minute and group, however
    /// many sessions of the batch ended in it.
    fn flush_rollup(&mut self) -> Result<(), DbError> {
        // By reference: cleared once the transaction commits (`commit`), kept when it fails.
        for ((span, at, mount, path, country, player), listeners) in &self.unique_rollup {
            self.db.exec(
                "INSERT INTO audience_uniques
                 (span_s, at_s, server, mount, path, country, player, listeners)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (span_s, at_s, server, mount, path, country, player) DO UPDATE SET
                 listeners = audience_uniques.listeners + excluded.listeners",
                &[
                    Val::Int(*span),
                    Val::Int(*at),
                    Val::from(&*self.server),
                    Val::from(&**mount),
                    Val::from(&**path),
                    Val::from(&**country),
                    Val::from(&**player),
                    Val::Int(*listeners),
                ],
            )?;
        }
        for ((minute, mount, path, country, player), (secs, sessions)) in &self.rollup {
            self.db.exec(
                "INSERT INTO audience_minutes
                 (minute, server, mount, path, country, player, listener_seconds, sessions)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (minute, server, mount, path, country, player) DO UPDATE SET
                 listener_seconds = audience_minutes.listener_seconds + excluded.listener_seconds,
                 sessions = audience_minutes.sessions + excluded.sessions",
                &[
                    Val::Int(*minute),
                    Val::from(&*self.server),
                    Val::from(&**mount),
                    Val::from(&**path),
                    Val::from(&**country),
                    Val::from(&**player),
                    Val::Float(*secs),
                    Val::Int(*sessions),
                ],
            )?;
        }
        Ok(())
    }

    /// Folds this server's appended ends (`session_ends`) into their sessions' rows: one
    /// statement rewrites each row once, however many ends the minute gathered, and the ends
    /// are then removed. Runs inside the caller's transaction.
    fn fold(&mut self) -> Result<(), DbError> {
        let server = Val::from(&*self.server);
        self.fold_ends("server = $1", server)?;
        self.unfolded = None;
        Ok(())
    }

    /// Folds the appended ends matching `filter` (over `session_ends`, with `$1` bound to
    /// `value`) into their sessions, then removes them: only those folded, or whose session
    /// is gone, so an end another writer of the same name committed after the `UPDATE`'s
    /// snapshot (PostgreSQL; an upgrade's two processes) waits for the next fold. An end
    /// without a mount (the session did not move) keeps its row's.
    fn fold_ends(&mut self, filter: &str, value: Val) -> Result<(), DbError> {
        self.db.exec(
            &format!(
                "UPDATE sessions SET ended_ms = e.ended_ms, seconds = e.seconds, bytes = e.bytes,
                 end_reason = e.end_reason, mount = COALESCE(e.mount, sessions.mount)
                 FROM session_ends e
                 WHERE e.{filter} AND sessions.server = e.server AND sessions.id = e.id
                 AND sessions.ended_ms IS NULL"
            ),
            std::slice::from_ref(&value),
        )?;
        // SQLite: the transaction holds the file's one write lock from its first write, so no
        // end can have come since the `UPDATE`; every end is folded, or its session is gone or
        // was closed already. All go, with no second look-up per end.
        let unfolded = match self.db.dialect() {
            Dialect::Sqlite => "",
            Dialect::Postgres => {
                " AND NOT EXISTS (
                    SELECT 1 FROM sessions s WHERE s.server = session_ends.server
                    AND s.id = session_ends.id AND s.ended_ms IS NULL)"
            }
        };
        self.db.exec(
            &format!("DELETE FROM session_ends WHERE {filter}{unfolded}"),
            &[value],
        )?;
        Ok(())
    }

    /// Folds every server's ends older than ten minutes: a server that stopped for good (or
    /// was renamed) leaves no end unfolded, so its sessions reach the retention like others.
    fn fold_orphans(&mut self, now: i64) -> Result<(), DbError> {
        self.db.batch("BEGIN")?;
        match self.fold_ends("ended_ms < $1", Val::Int(now - 600_000)) {
            Ok(()) => self.db.batch("COMMIT"),
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// An open session's facts read back from the database (one started by an earlier
    /// process: a binary upgrade handed it over, or a crash left it open).
    fn stored_open_row(&mut self, id: i64) -> Result<Option<OpenRow>, DbError> {
        let rows = self.db.query(
            "SELECT path, relay, started_ms, country, player, mount FROM sessions
             WHERE id = $1 AND server = $2 AND ended_ms IS NULL",
            &[Val::Int(id), Val::from(&*self.server)],
        )?;
        let mut name = |v: &Val| self.names.get(&v.text().unwrap_or_default());
        Ok(rows.first().map(|r| OpenRow {
            mount: name(&r[5]),
            path: name(&r[0]),
            relay: r[1].int() != 0,
            started_ms: r[2].int(),
            country: name(&r[3]),
            player: name(&r[4]),
        }))
    }

    fn play(&mut self, p: &Play) -> Result<(), DbError> {
        let (artist, title) = split_title(&p.title);
        self.db.exec(
            "INSERT INTO plays (server, mount, at_ms, artist, title, set_by, listeners)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                Val::from(&*self.server),
                Val::from(p.mount.as_str()),
                Val::Int(p.at_ms),
                Val::from(artist),
                Val::from(title),
                Val::from(p.set_by.as_str()),
                Val::Int(p.listeners.min(i64::MAX as u64) as i64),
            ],
        )?;
        if self.playlistlog.is_some() {
            // Written once the batch is committed (`write_playlog`): a retried batch logs once.
            self.playlog_lines
                .push(playlistlog_line(p, chrono::Local::now().fixed_offset()));
        }
        Ok(())
    }

    /// Deletes rows older than the retention.
    fn expire(&mut self, now: i64) -> Result<(), DbError> {
        let cutoff = now - i64::from(self.retention_days) * DAY_MS;
        self.db.batch("BEGIN")?;
        let done = (|| {
            self.db.exec(
                "DELETE FROM sessions WHERE ended_ms IS NOT NULL AND ended_ms < $1",
                &[Val::Int(cutoff)],
            )?;
            self.db
                .exec("DELETE FROM plays WHERE at_ms < $1", &[Val::Int(cutoff)])?;
            self.db.exec(
                "DELETE FROM audience_minutes WHERE minute < $1",
                &[Val::Int(cutoff / 1000)],
            )?;
            // Periods that ended before the cutoff.
            for span in [HOUR_S, DAY_S] {
                self.db.exec(
                    "DELETE FROM audience_uniques WHERE span_s = $1 AND at_s < $2",
                    &[Val::Int(span), Val::Int(cutoff / 1000 - span)],
                )?;
            }
            self.db.exec(
                "DELETE FROM ledger_salts WHERE day < $1",
                &[Val::Int(day_of(now) - 1)],
            )?;
            Ok(())
        })();
        match done {
            Ok(()) => self.db.batch("COMMIT"),
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// `Artist - Title` split at the first ` - ` (the ICY convention, as Icecast 2.4.4 `admin.c`
/// joins `artist` and `title`); a title without one has no artist.
pub fn split_title(full: &str) -> (Option<String>, String) {
    match full.split_once(" - ") {
        Some((a, t)) if !a.trim().is_empty() && !t.trim().is_empty() => {
            (Some(a.trim().to_owned()), t.trim().to_owned())
        }
        _ => (None, full.trim().to_owned()),
    }
}

/// One line of Icecast's playlist log: `time|mount|listeners|title`, the time as
/// `%d/%b/%Y:%H:%M:%S %z` (Icecast 2.4.4 `logging.c` `logging_playlist`).
pub fn playlistlog_line(p: &Play, now: chrono::DateTime<chrono::FixedOffset>) -> String {
    format!(
        "{}|{}|{}|{}\n",
        now.format("%d/%b/%Y:%H:%M:%S %z"),
        p.mount,
        p.listeners,
        p.title.replace(['\n', '\r'], " ")
    )
}

#[cfg(test)]
mod tests {
    use super::super::report::{self, Group, Range};
    use super::*;

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn writer() -> Writer {
        let mut db = Db::Sqlite(
            rusqlite::Connection::open_in_memory().unwrap(),
            Default::default(),
        );
        super::super::schema::migrate(&mut db).unwrap();
        Writer::new(
            db,
            Arc::from("test:8000"),
            AddressPolicy::Full,
            None,
            0,
            None,
        )
    }

    fn start(id: i64, at: i64, ip: &str) -> Msg {
        Msg::Start(
            id,
            at,
            SessionStart {
                mount: "/live".into(),
                path: "icy",
                relay: false,
                agent: Some("VLC/3.0.20 LibVLC/3.0.20".into()),
                referer: None,
                user: None,
                ip: ip.parse().unwrap(),
            },
        )
    }

    fn end(id: i64, started: i64, ended: i64) -> Msg {
        Msg::End(SessionEnd {
            id,
            mount: "/live".into(),
            ended_ms: ended,
            seconds: (ended - started) as f64 / 1000.0,
            bytes: 1000,
            reason: "client:hung-up",
        })
    }

    fn pending_ends(w: &mut Writer) -> i64 {
        w.db.query("SELECT COUNT(*) FROM session_ends", &[])
            .unwrap()[0][0]
            .int()
    }

    #[test]
    fn ends_count_in_reports_before_and_after_they_are_folded() {
        let mut w = writer();
        w.commit(
            &mut vec![
                start(1, T0, "10.0.0.1"),
                start(2, T0 + 1_000, "10.0.0.2"),
                start(3, T0 + 2_000, "10.0.0.1"),
            ],
            false,
        )
        .unwrap();
        w.commit(
            &mut vec![end(1, T0, T0 + 30_000), end(2, T0 + 1_000, T0 + 41_000)],
            false,
        )
        .unwrap();
        let range = Range {
            from_ms: T0 - 60_000,
            to_ms: T0 + 3_600_000,
            mount: None,
        };
        let check = |w: &mut Writer| {
            let rows = report::sessions(&mut w.db, &range, 100).unwrap();
            assert_eq!(rows.len(), 3);
            let one = rows.iter().find(|r| r.id == 1).unwrap();
            assert_eq!(one.ended_ms, Some(T0 + 30_000));
            assert_eq!(one.bytes, Some(1000));
            assert_eq!(one.end_reason.as_deref(), Some("client:hung-up"));
            assert_eq!(rows.iter().find(|r| r.id == 3).unwrap().ended_ms, None);
            let l = report::listening(&mut w.db, &range, Group::Day).unwrap();
            assert_eq!(l.total.sessions, 2);
            // 10.0.0.1 twice and 10.0.0.2 once: two listeners.
            assert_eq!(l.total.unique_listeners, 2);
            assert!((l.total.tlh_hours - 70.0 / 3600.0).abs() < 1e-3);
        };
        assert_eq!(pending_ends(&mut w), 2);
        check(&mut w);
        w.commit(&mut Vec::new(), true).unwrap();
        assert_eq!(pending_ends(&mut w), 0);
        check(&mut w);
    }

    #[test]
    fn a_batch_that_cannot_be_committed_is_kept_whole_and_written_once_when_the_database_answers() {
        let mut w = writer();
        w.playlistlog = None;
        w.commit(&mut vec![start(1, T0, "10.0.0.1")], false)
            .unwrap();
        // The database refuses the ends (as a full disk or a closed connection would).
        w.db.batch("ALTER TABLE session_ends RENAME TO broken")
            .unwrap();
        let mut pending = vec![
            start(2, T0 + 1_000, "10.0.0.2"),
            end(1, T0, T0 + 30_000),
            end(2, T0 + 1_000, T0 + 41_000),
        ];
        for _ in 0..3 {
            assert!(w.commit(&mut pending, false).is_err());
            assert_eq!(pending.len(), 3, "the batch is kept whole");
            // Its changes to the writer are undone: session 1 is open again, 2 never was.
            assert!(w.open.contains_key(&1));
            assert!(!w.open.contains_key(&2));
            assert!(w.rollup.is_empty());
        }
        w.db.batch("ALTER TABLE broken RENAME TO session_ends")
            .unwrap();
        w.commit(&mut pending, true).unwrap();
        assert!(pending.is_empty());
        let range = Range {
            from_ms: T0 - 60_000,
            to_ms: T0 + 3_600_000,
            mount: None,
        };
        // Every session once, with its end; the minutes and uniques once, not once per try.
        let rows = report::sessions(&mut w.db, &range, 100).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.ended_ms.is_some()));
        let l = report::listening(&mut w.db, &range, Group::Day).unwrap();
        assert_eq!(l.total.sessions, 2);
        assert_eq!(l.total.unique_listeners, 2);
        assert!((l.total.tlh_hours - 70.0 / 3600.0).abs() < 1e-3);
    }

    #[test]
    fn a_session_that_moved_ends_on_its_new_mount_and_the_others_keep_theirs() {
        let mut w = writer();
        w.commit(
            &mut vec![start(1, T0, "10.0.0.1"), start(2, T0, "10.0.0.2")],
            false,
        )
        .unwrap();
        let Msg::End(mut moved) = end(2, T0, T0 + 20_000) else {
            unreachable!()
        };
        moved.mount = "/fallback".into();
        w.commit(&mut vec![end(1, T0, T0 + 10_000), Msg::End(moved)], false)
            .unwrap();
        // Only the move is appended with a mount: the fold leaves the others' mounts alone.
        let appended =
            w.db.query("SELECT id, mount FROM session_ends ORDER BY id", &[])
                .unwrap();
        assert_eq!(appended[0][1], Val::Null);
        assert_eq!(appended[1][1], Val::from("/fallback"));
        let mounts = |w: &mut Writer| {
            w.db.query("SELECT mount FROM session_rows ORDER BY id", &[])
                .unwrap()
                .into_iter()
                .map(|r| r[0].text().unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(mounts(&mut w), ["/live", "/fallback"]);
        w.commit(&mut Vec::new(), true).unwrap();
        assert_eq!(pending_ends(&mut w), 0);
        assert_eq!(mounts(&mut w), ["/live", "/fallback"]);
        let ended =
            w.db.query(
                "SELECT COUNT(*) FROM sessions WHERE ended_ms IS NOT NULL",
                &[],
            )
            .unwrap();
        assert_eq!(ended[0][0].int(), 2);
    }

    #[test]
    fn recovery_keeps_appended_ends_and_closes_the_open_rest() {
        let mut w = writer();
        w.announce(T0).unwrap();
        w.commit(
            &mut vec![start(1, T0, "10.0.0.1"), start(2, T0, "10.0.0.2")],
            false,
        )
        .unwrap();
        w.commit(&mut vec![end(1, T0, T0 + 30_000)], false).unwrap();
        // A crash here: the end of 1 is appended, not folded; 2 is open. The next start:
        w.open.clear();
        assert_eq!(w.recover(T0 + 60_000).unwrap(), 1);
        assert_eq!(pending_ends(&mut w), 0);
        let rows =
            w.db.query(
                "SELECT id, ended_ms, end_reason FROM sessions ORDER BY id",
                &[],
            )
            .unwrap();
        assert_eq!(rows[0][1].int(), T0 + 30_000);
        assert_eq!(rows[0][2].text().as_deref(), Some("client:hung-up"));
        assert_eq!(rows[1][2].text().as_deref(), Some(CRASHED));
    }

    #[test]
    fn a_restarted_writer_does_not_count_todays_listeners_again() {
        let mut w = writer();
        let now = now_ms();
        w.commit(&mut vec![start(1, now, "10.0.0.1")], false)
            .unwrap();
        w.uniques = Uniques::new();
        assert_eq!(w.load_uniques(now).unwrap(), 1);
        w.commit(&mut vec![start(2, now + 1, "10.0.0.1")], false)
            .unwrap();
        let day = now.div_euclid(1000).div_euclid(DAY_S) * DAY_S;
        let counted =
            w.db.query(
                "SELECT listeners FROM audience_uniques WHERE span_s = $1 AND at_s = $2
                 AND mount = ''",
                &[Val::Int(DAY_S), Val::Int(day)],
            )
            .unwrap();
        assert_eq!(counted[0][0].int(), 1);
    }

    #[test]
    fn titles_split_into_artist_and_title() {
        assert_eq!(
            split_title("Daft Punk - One More Time"),
            (Some("Daft Punk".into()), "One More Time".into())
        );
        assert_eq!(split_title("Station ID"), (None, "Station ID".into()));
        assert_eq!(split_title(" - x"), (None, "- x".into()));
        assert_eq!(split_title("A - B - C"), (Some("A".into()), "B - C".into()));
    }

    #[test]
    fn playlistlog_lines_are_icecasts() {
        let p = Play {
            mount: "/live".into(),
            at_ms: 0,
            title: "A - B\nC".into(),
            set_by: super::super::message::TitleSetter::Source,
            listeners: 12,
        };
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-27T10:11:12+01:00").unwrap();
        assert_eq!(
            playlistlog_line(&p, t),
            "27/Nov/2026:10:11:12 +0100|/live|12|A - B C\n"
        );
    }
}
