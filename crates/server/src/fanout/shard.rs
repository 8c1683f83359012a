//! A fan-out shard: one thread owning a set of listeners, walking them on a timer.
//!
//! Each shard has its own `mio` poll. Listeners are split into [`BUCKETS`] buckets by slab key;
//! every `write-interval / BUCKETS` the shard walks one bucket, so each listener gets one
//! coalesced `writev` per write interval (about one per second) holding everything new since the
//! last: shared chunks, never copied, with ICY blocks interleaved. A listener only gets an extra
//! write when its socket was full and becomes writable again. Read readiness is used to notice a
//! listener hanging up at once. No lock is shared by the listeners: a shard loads each mount's
//! queue snapshot once per tick.
//!
//! Listeners can change mount without being disconnected (fallback when a source ends,
//! `fallback-override`, admin `moveclients`): the switch happens when the listener's position is
//! on a chunk boundary, so on an MP3/ADTS frame or Ogg page boundary, and it joins the new mount
//! at its burst point (with its Ogg header pages, and a fresh ICY title). Moves and the admin
//! listener queries live in `shard/moves.rs`.
//!
//! What to do with a listener at each visit (write, switch to the fallback, skip ahead, close)
//! and when the next tick is due are pure functions in `shard/decide.rs`: the loop reads the
//! clock once per pass and passes `now` down, so those decisions are unit-tested without
//! sockets or sleeps.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::audience::follow::{self, JoinAt, Joined};
use crate::audience::page::Page;
use crate::audience::{AudiencePath, EndReason, ListenerInfo, ListenerRow};
use crate::config::LagPolicy;
use crate::fanout::cursor::{Cursor, SegKind};
use crate::fanout::handover::{AdoptedListener, ExportedListener, ListenerState};
use crate::fanout::seal::{SealingWriter, TlsListener};
use crate::fanout::shard::decide::{ListenerView, MountView, Ticker, Verdict};
use crate::fanout::write_path::{write_due, Written, MAX_WRITE_BYTES};
use crate::mount::icy_meta::IcyMeta;
use crate::mount::live::Mount;
use crate::mount::queue::QueueSnapshot;
use crate::mount::registry::Fallback;
use crate::net::clients::ClientSlot;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::{Metrics, MountLabel};

pub use self::decide::BUCKETS;
use crate::audience::follow::MoveFilter;

/// Most `writev` calls for one listener in one visit, when each one is taken whole and more is
/// due (a large burst, or a listener catching up).
pub const MAX_WRITES_PER_VISIT: usize = 4;

const WAKER: Token = Token(usize::MAX);

pub(crate) mod decide;
mod moves;

/// A listener handed to a shard after its request was accepted.
#[derive(Debug)]
pub struct NewListener {
    /// The connection (non-blocking).
    pub stream: std::net::TcpStream,
    /// The mount it listens to (a listener slot is already taken).
    pub mount: Arc<Mount>,
    /// Response head bytes, sent before the stream.
    pub head: Bytes,
    /// Intro audio (Icecast `<intro>`), sent after the head and before the stream.
    pub intro: Option<Bytes>,
    /// ICY metadata interval in bytes, if the listener asked for metadata.
    pub metaint: Option<u32>,
    /// Request facts.
    pub info: ListenerInfo,
    /// Its unit of the `clients` count, released when the shard drops the listener.
    pub client_slot: ClientSlot,
    /// For a listener over TLS: its transmit keys; everything sent is sealed (`seal.rs`).
    pub tls: Option<Box<TlsListener>>,
    /// A downstream relay (an edge's or the relay user's `[[relay]]`, `cluster/redirect.rs`
    /// `is_relay`): visited at every tick ([`decide::extra_tick_visit`]), a tenth of the write
    /// interval, instead of once per interval, so a relay hop adds at most that much latency
    /// and the edge's own listeners do not see its chunking on top of theirs.
    pub relay: bool,
}

/// Settings shared by all shards.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Interval between coalesced writes to one listener.
    pub write_interval: Duration,
    /// What to do with a listener lagging more than queue-size.
    pub lag_policy: LagPolicy,
}

/// Shared things a shard reports to.
#[derive(Clone)]
pub struct ShardContext {
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Access log.
    pub access_log: AccessLog,
    /// Where listeners of an ended mount go: its live fallback, if any (see
    /// [`crate::mount::registry::Registry::fallback_target`]).
    pub fallback: FallbackFn,
    /// The audience ledger, if the server keeps one (adopted listeners continue their rows).
    pub ledger: Option<crate::ledger::Ledger>,
}

impl std::fmt::Debug for ShardContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardContext").finish_non_exhaustive()
    }
}

/// Finds where the listeners of an ended mount go.
pub type FallbackFn = Arc<dyn Fn(&Mount) -> Fallback + Send + Sync>;

enum Command {
    Join(Box<NewListener>),
    Move {
        filter: MoveFilter,
        to: Arc<Mount>,
        reply: Option<tokio::sync::oneshot::Sender<usize>>,
    },
    List {
        mount: Option<String>,
        page: Page,
        reply: tokio::sync::oneshot::Sender<Vec<ListenerRow>>,
    },
    Kill {
        id: u64,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    Export(tokio::sync::oneshot::Sender<Vec<ExportedListener>>),
    Adopt(Box<AdoptedListener>),
    /// Close every listener, each ended with this reason (`shutdown:shutdown`, or
    /// `shutdown:drained` after a drain), and stop the thread.
    Shutdown(EndReason),
}

/// The handle other threads use to give a shard listeners.
#[derive(Debug)]
pub struct ShardHandle {
    tx: mpsc::Sender<Command>,
    waker: Arc<Waker>,
    load: Arc<AtomicUsize>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::Join(_) => "Join",
            Command::Move { .. } => "Move",
            Command::List { .. } => "List",
            Command::Kill { .. } => "Kill",
            Command::Export(_) => "Export",
            Command::Adopt(_) => "Adopt",
            Command::Shutdown(_) => "Shutdown",
        })
    }
}

impl ShardHandle {
    /// Starts shard thread number `index`.
    ///
    /// Errors: the poll or the thread cannot be created.
    pub fn spawn(
        index: usize,
        cfg: ShardConfig,
        ctx: ShardContext,
    ) -> std::io::Result<ShardHandle> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = mpsc::channel();
        let load = Arc::new(AtomicUsize::new(0));
        let epoch = Instant::now();
        let mut shard = Shard {
            poll,
            rx,
            slots: Slab::new(),
            mounts: Vec::new(),
            cfg,
            ctx,
            load: load.clone(),
            scratch: Vec::new(),
            seal_scratch: Vec::new(),
            moves: std::collections::HashMap::new(),
            relays: Vec::new(),
            epoch,
            now: epoch,
            now_s: 0,
            closing: EndReason::Shutdown,
        };
        let thread = std::thread::Builder::new()
            .name(format!("fanout-{index}"))
            .spawn(move || shard.run())?;
        Ok(ShardHandle {
            tx,
            waker,
            load,
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Listeners this shard holds (including ones queued to join).
    pub fn load(&self) -> usize {
        self.load.load(Ordering::Relaxed)
    }

    /// Hands a listener to the shard; it gets its head and burst at once.
    pub fn join(&self, l: Box<NewListener>) {
        self.load.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(Command::Join(l)).is_ok() {
            let _ = self.waker.wake();
        }
    }

    fn send(&self, cmd: Command) {
        if self.tx.send(cmd).is_ok() {
            let _ = self.waker.wake();
        }
    }

    /// Moves the listeners matching `filter` to mount `to` at their next frame boundary;
    /// `reply` gets how many were scheduled to move.
    pub fn move_listeners(
        &self,
        filter: MoveFilter,
        to: Arc<Mount>,
        reply: Option<tokio::sync::oneshot::Sender<usize>>,
    ) {
        self.send(Command::Move { filter, to, reply });
    }

    /// Lists this shard's listeners (of `mount`, or all) on `page`.
    pub fn list(
        &self,
        mount: Option<String>,
        page: Page,
        reply: tokio::sync::oneshot::Sender<Vec<ListenerRow>>,
    ) {
        self.send(Command::List { mount, page, reply });
    }

    /// Closes listener `id` if this shard holds it; `reply` says whether it did.
    pub fn kill(&self, id: u64, reply: tokio::sync::oneshot::Sender<bool>) {
        self.send(Command::Kill { id, reply });
    }

    /// Gives up every listener (binary upgrade); `reply` gets them with their state.
    pub fn export(&self, reply: tokio::sync::oneshot::Sender<Vec<ExportedListener>>) {
        self.send(Command::Export(reply));
    }

    /// Takes a listener carried across a binary upgrade, continuing at its cursor.
    pub fn adopt(&self, l: Box<AdoptedListener>) {
        self.load.fetch_add(1, Ordering::Relaxed);
        self.send(Command::Adopt(l));
    }

    /// Closes every listener, each ended with `why`, and stops the thread.
    pub fn shutdown(&self, why: EndReason) {
        let _ = self.tx.send(Command::Shutdown(why));
        let _ = self.waker.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

/// The request facts of a listener carried across an upgrade, for this process's clock (the
/// close hook of URL authentication does not travel: see docs/operators.md).
fn adopted_info(state: &ListenerState, ledger: Option<&crate::ledger::Ledger>) -> ListenerInfo {
    let now = Instant::now();
    ListenerInfo {
        id: state.id,
        path: AudiencePath::Icy,
        ip: state.ip,
        request_line: state.request_line.clone(),
        agent: state.agent.clone(),
        referer: state.referer.clone(),
        started: now
            .checked_sub(Duration::from_millis(state.connected_ms))
            .unwrap_or(now),
        requested_mount: state.requested_mount.clone(),
        user: state.user.clone(),
        deadline: state.deadline_ms.map(|ms| now + Duration::from_millis(ms)),
        on_close: None,
        ledger: state
            .ledger_session
            .and_then(|(id, started_ms)| ledger.map(|l| l.adopt(id, started_ms))),
    }
}

struct Slot {
    stream: TcpStream,
    mount: usize,
    cursor: Cursor,
    sent: u64,
    backlogged: bool,
    /// Seconds since the shard's epoch when the listener must go; 0 for never.
    deadline_s: u32,
    info: Box<ListenerInfo>,
    /// Released (dropped) when the listener goes.
    _client_slot: ClientSlot,
    /// The sealing state of a listener over TLS.
    tls: Option<Box<TlsListener>>,
    /// A downstream relay, also kept in `Shard::relays`.
    relay: bool,
}

struct ShardMount {
    mount: Arc<Mount>,
    label: MountLabel,
    snapshot: Arc<QueueSnapshot>,
    icy: Arc<IcyMeta>,
    listeners: usize,
    unflushed_bytes: u64,
    /// When this shard first saw the feed ended.
    ended_at: Option<Instant>,
    /// Where this mount's listeners go once they have drained it (its feed ended and a
    /// fallback is live).
    successor: Option<Arc<Mount>>,
    /// An on-demand relay along the fallback chain is starting: drained listeners wait for it
    /// (at most [`ENDED_GRACE`]) instead of being closed.
    awaiting_fallback: bool,
    /// The queue's head at the previous tick, to see a burst coming ([`decide::runs_ahead`]).
    last_head: u64,
}

impl ShardMount {
    /// Loads the mount's current queue and metadata; for an ended feed, notes when it was first
    /// seen ended (`now`) and finds its live fallback. True when a fallback was newly found (its
    /// listeners should move now).
    fn refresh(
        &mut self,
        fallback: &(dyn Fn(&Mount) -> Fallback + Send + Sync),
        now: Instant,
    ) -> bool {
        self.snapshot = self.mount.queue.load();
        self.icy = self.mount.icy.load_full();
        if self.snapshot.ended {
            if self.ended_at.is_none() {
                self.ended_at = Some(now);
            }
            if self.successor.as_ref().is_none_or(|s| s.queue.load().ended) {
                let next = fallback(&self.mount);
                self.awaiting_fallback = matches!(next, Fallback::Starting);
                self.successor = match next {
                    Fallback::Live(m) => Some(m),
                    Fallback::Starting | Fallback::Nothing => None,
                };
                return self.successor.is_some();
            }
        }
        false
    }

    /// Adds the bytes sent since the last flush to the mount's counter and the metric.
    fn flush_bytes(&mut self, metrics: &Metrics) {
        if self.unflushed_bytes > 0 {
            metrics
                .bytes_sent
                .get_or_create(&self.label)
                .inc_by(self.unflushed_bytes);
            self.mount
                .bytes_sent
                .fetch_add(self.unflushed_bytes, Ordering::Relaxed);
            self.unflushed_bytes = 0;
        }
    }
}

struct Shard {
    poll: Poll,
    rx: mpsc::Receiver<Command>,
    slots: Slab<Slot>,
    mounts: Vec<Option<ShardMount>>,
    cfg: ShardConfig,
    ctx: ShardContext,
    load: Arc<AtomicUsize>,
    scratch: Vec<(SegKind, usize)>,
    /// Records sealed for TLS listeners, reused across them.
    seal_scratch: Vec<u8>,
    /// Listeners to move to another mount at their next frame boundary, by slab key.
    moves: std::collections::HashMap<usize, Arc<Mount>>,
    /// Slab keys of the downstream relays ([`NewListener::relay`]), visited at every tick.
    relays: Vec<usize>,
    epoch: Instant,
    /// The clock, read once per pass of the loop (right after the poll returns); every
    /// decision of that pass uses it.
    now: Instant,
    /// `now` in whole seconds since `epoch`.
    now_s: u32,
    /// The end reason of the listeners still here when the thread stops (set by
    /// [`Command::Shutdown`]).
    closing: EndReason,
}

impl Shard {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut ticker = Ticker::new(Instant::now(), self.cfg.write_interval);
        loop {
            let timeout = ticker.timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    // Never give up the shard: its listeners and counts live here.
                    tracing::error!("fan-out poll failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            }
            self.now = Instant::now();
            self.now_s = decide::secs_since(self.epoch, self.now);
            let mut woken = false;
            for ev in events.iter() {
                if ev.token() == WAKER {
                    woken = true;
                    continue;
                }
                let key = ev.token().0;
                if !self.slots.contains(key) {
                    continue;
                }
                if (ev.is_readable() || ev.is_read_closed() || ev.is_error()) && self.hung_up(key) {
                    self.close(key, EndReason::HungUp);
                    continue;
                }
                if decide::write_on_event(ev.is_writable(), self.slots[key].backlogged) {
                    self.write(key);
                }
            }
            if woken && !self.commands() {
                self.close_all();
                return;
            }
            if let Some(bucket) = ticker.due(self.now) {
                self.refresh_mounts();
                self.walk_bucket(bucket);
                self.visit_relays(bucket);
            }
        }
    }

    /// Handles queued commands; false on shutdown.
    fn commands(&mut self) -> bool {
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Join(l) => self.add(*l),
                Command::Move { filter, to, reply } => {
                    let n = self.schedule_moves(&filter, &to);
                    if let Some(r) = reply {
                        let _ = r.send(n);
                    }
                }
                Command::List { mount, page, reply } => {
                    let _ = reply.send(self.rows(mount.as_deref(), page));
                }
                Command::Kill { id, reply } => {
                    let key = self
                        .slots
                        .iter()
                        .find(|(_, s)| s.info.id == id)
                        .map(|(k, _)| k);
                    if let Some(k) = key {
                        self.close(k, EndReason::Killed);
                    }
                    let _ = reply.send(key.is_some());
                }
                Command::Export(reply) => {
                    let _ = reply.send(self.export_all());
                }
                Command::Adopt(l) => self.adopt(*l),
                Command::Shutdown(why) => {
                    self.closing = why;
                    return false;
                }
            }
        }
        true
    }

    fn mount_index(&mut self, mount: &Arc<Mount>) -> usize {
        if let Some(i) = self
            .mounts
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| Arc::ptr_eq(&m.mount, mount)))
        {
            return i;
        }
        let sm = ShardMount {
            mount: mount.clone(),
            label: MountLabel::new(&mount.name),
            snapshot: mount.queue.load(),
            icy: mount.icy.load_full(),
            listeners: 0,
            unflushed_bytes: 0,
            ended_at: None,
            successor: None,
            awaiting_fallback: false,
            last_head: mount.queue.load().head,
        };
        match self.mounts.iter().position(Option::is_none) {
            Some(i) => {
                self.mounts[i] = Some(sm);
                i
            }
            None => {
                self.mounts.push(Some(sm));
                self.mounts.len() - 1
            }
        }
    }

    fn add(&mut self, l: NewListener) {
        let NewListener {
            stream,
            mount,
            head,
            intro,
            metaint,
            info,
            client_slot,
            tls,
            relay,
        } = l;
        let mi = self.mount_index(&mount);
        let fallback = self.ctx.fallback.clone();
        let sm = self.mounts[mi].as_mut().expect("just inserted");
        sm.refresh(fallback.as_ref(), self.now);
        sm.listeners += 1;
        let Joined {
            pos,
            headers: ogg_headers,
        } = follow::join(&sm.snapshot, JoinAt::Burst(mount.burst_size()));
        let is_ogg = mount.settings.format == throng_proto::format::Format::Ogg;
        // Head, intro and header pages are queued as shared pieces, never copied per listener.
        let mut cursor = Cursor::new(pos, head, metaint);
        if let Some(i) = &intro {
            if is_ogg {
                // An Ogg intro is a stream of its own: it goes before the mount's header pages.
                cursor.push_prefix(i.clone());
            } else {
                cursor.add_intro(i, &sm.icy);
            }
        }
        if let Some(h) = ogg_headers {
            cursor.push_prefix((*h).clone());
        }
        self.insert(stream, mi, &mount, cursor, 0, info, client_slot, tls, relay);
    }

    /// Registers a listener's socket and inserts it on mount index `mi` (whose listener count
    /// already includes it) at `cursor`, then writes what it is due at once (time to first byte
    /// is one writev after the request). A socket that cannot be registered is closed.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        stream: std::net::TcpStream,
        mi: usize,
        mount: &Mount,
        cursor: Cursor,
        sent: u64,
        info: ListenerInfo,
        client_slot: ClientSlot,
        tls: Option<Box<TlsListener>>,
        relay: bool,
    ) {
        let mut stream = TcpStream::from_std(stream);
        let key = self.slots.vacant_key();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!("cannot register listener: {e}");
            let sm = self.mounts[mi].as_mut().expect("mount of a listener");
            sm.listeners -= 1;
            if sm.listeners == 0 {
                self.mounts[mi] = None;
            }
            self.finish(mount, info, sent, EndReason::WriteFailed);
            return;
        }
        let deadline_s = decide::deadline_secs(info.deadline, self.epoch);
        self.slots.insert(Slot {
            stream,
            mount: mi,
            cursor,
            sent,
            backlogged: false,
            deadline_s,
            info: Box::new(info),
            _client_slot: client_slot,
            tls,
            relay,
        });
        if relay {
            self.relays.push(key);
        }
        self.write(key);
    }

    /// Inserts a listener carried across an upgrade at its cursor and writes what it is due.
    fn adopt(&mut self, l: AdoptedListener) {
        let AdoptedListener {
            stream,
            mount,
            state,
            client_slot,
            tls,
        } = l;
        let tls = match tls.map(TlsListener::import).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                // Unusable keys: the socket is dropped here; the player reconnects.
                tracing::warn!(
                    id = state.id,
                    "upgrade: a TLS listener's keys are unusable: {e}"
                );
                self.load.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        };
        mount.force_add_listener();
        self.ctx
            .metrics
            .listeners
            .get_or_create(&MountLabel::new(&mount.name))
            .inc();
        let mi = self.mount_index(&mount);
        let fallback = self.ctx.fallback.clone();
        let sm = self.mounts[mi].as_mut().expect("just inserted");
        sm.refresh(fallback.as_ref(), self.now);
        sm.listeners += 1;
        let info = adopted_info(&state, self.ctx.ledger.as_ref());
        let sent = state.sent;
        let relay = state.relay;
        self.insert(
            stream,
            mi,
            &mount,
            Cursor::import(state.cursor),
            sent,
            info,
            client_slot,
            tls,
            relay,
        );
    }

    /// Takes every listener out of the shard, without closing, logging or counting it.
    fn export_all(&mut self) -> Vec<ExportedListener> {
        self.moves.clear();
        self.relays.clear();
        let now = Instant::now();
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let mut slot = self.slots.remove(key);
            let _ = self.poll.registry().deregister(&mut slot.stream);
            let sm = self.mounts[slot.mount]
                .as_mut()
                .expect("mount of a live slot");
            sm.listeners -= 1;
            sm.mount.remove_listener();
            let mount = sm.mount.clone();
            let mount_id = mount.id;
            if sm.listeners == 0 {
                sm.flush_bytes(&self.ctx.metrics);
                self.mounts[slot.mount] = None;
            }
            self.load.fetch_sub(1, Ordering::Relaxed);
            let info = &slot.info;
            let deadline_ms = info
                .deadline
                .map(|d| d.saturating_duration_since(now).as_millis() as u64);
            let state = ListenerState {
                id: info.id,
                ip: info.ip,
                request_line: info.request_line.clone(),
                agent: info.agent.clone(),
                referer: info.referer.clone(),
                user: info.user.clone(),
                connected_ms: now.duration_since(info.started).as_millis() as u64,
                deadline_ms,
                requested_mount: info.requested_mount.clone(),
                mount_id,
                sent: slot.sent,
                cursor: slot.cursor.export(),
                relay: slot.relay,
                ledger_session: slot.info.ledger.take().map(|t| t.hand_over()),
            };
            // mio's stream owns the descriptor; it moves to a std stream, still open.
            let stream = std::net::TcpStream::from(std::os::fd::OwnedFd::from(slot.stream));
            out.push(ExportedListener {
                stream,
                mount,
                state,
                tls: slot.tls.as_ref().map(|t| t.export()),
            });
        }
        out
    }

    fn refresh_mounts(&mut self) {
        let fallback = self.ctx.fallback.clone();
        let mut ended = Vec::new();
        let mut bursting = Vec::new();
        for (i, sm) in self.mounts.iter_mut().enumerate() {
            if let Some(sm) = sm {
                if sm.refresh(fallback.as_ref(), self.now) {
                    ended.push(i);
                }
                let (head, tail) = (sm.snapshot.head, sm.snapshot.tail());
                let span = head - tail;
                // Until the queue is full (tail 0) nobody can fall behind it.
                if tail > 0 && decide::runs_ahead(head.saturating_sub(sm.last_head), span) {
                    bursting.push((i, head, span));
                }
                sm.last_head = head;
                sm.flush_bytes(&self.ctx.metrics);
            }
        }
        if !bursting.is_empty() {
            // The queue runs ahead of the regular visits: listeners that lag are written now
            // too, so a burst up to queue-size never drops one that keeps up.
            let keys: Vec<usize> = self
                .slots
                .iter()
                .filter(|(_, s)| {
                    bursting.iter().any(|&(m, head, span)| {
                        s.mount == m && decide::needs_extra_visit(s.cursor.pos, head, span)
                    })
                })
                .map(|(k, _)| k)
                .collect();
            for k in keys {
                if self.slots.contains(k) {
                    self.write(k);
                }
            }
        }
        if !ended.is_empty() {
            // A source just ended and its fallback is live: visit its listeners now rather
            // than at their next turn, so those already drained switch without a gap.
            let keys: Vec<usize> = self
                .slots
                .iter()
                .filter(|(_, s)| ended.contains(&s.mount))
                .map(|(k, _)| k)
                .collect();
            for k in keys {
                if self.slots.contains(k) {
                    self.write(k);
                }
            }
        }
    }

    fn walk_bucket(&mut self, bucket: usize) {
        let cap = self.slots.capacity();
        let mut key = bucket;
        while key < cap {
            if self.slots.contains(key) {
                self.write(key);
            }
            key += BUCKETS;
        }
    }

    /// Writes the downstream relays that `bucket`'s walk did not visit: each relay gets a visit
    /// at every tick.
    fn visit_relays(&mut self, bucket: usize) {
        if self.relays.is_empty() {
            return;
        }
        // A write may close a relay (and edit `relays`): walk a copy (a handful of keys).
        let keys = self.relays.clone();
        for key in keys {
            if decide::extra_tick_visit(key, bucket) && self.slots.contains(key) {
                self.write(key);
            }
        }
    }

    /// Reads and discards whatever the listener sent; true if it hung up.
    fn hung_up(&mut self, key: usize) -> bool {
        let mut buf = [0u8; 512];
        let slot = &mut self.slots[key];
        for _ in 0..16 {
            match slot.stream.read(&mut buf) {
                Ok(0) => return true,
                // A TLS listener sends nothing after its request but close_notify or a key
                // update, which the shard does not decrypt: either way it goes.
                Ok(_) if slot.tls.is_some() => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return true,
            }
        }
        false
    }

    /// Writes everything the listener is due (a few `writev`s at most), or closes it.
    fn write(&mut self, key: usize) {
        for _ in 0..MAX_WRITES_PER_VISIT {
            if !self.write_once(key) {
                break;
            }
        }
    }

    /// One `writev`; true when it was taken whole and the listener may have more due. What to
    /// do is [`decide::visit`]'s verdict; this only carries it out.
    fn write_once(&mut self, key: usize) -> bool {
        let mut max_bytes = MAX_WRITE_BYTES;
        if !self.moves.is_empty() && self.moves.contains_key(&key) && !self.apply_move(key) {
            max_bytes = self
                .move_write_cap(key)
                .map_or(max_bytes, |c| c.min(max_bytes));
        }
        let slot = &mut self.slots[key];
        let sm = self.mounts[slot.mount]
            .as_mut()
            .expect("mount of a live slot");
        let verdict = decide::visit(
            ListenerView {
                pos: slot.cursor.pos,
                pending: slot.cursor.has_pending(),
                deadline_s: slot.deadline_s,
            },
            MountView {
                tail: sm.snapshot.tail(),
                head: sm.snapshot.head,
                ended_at: sm.ended_at,
                successor: sm.successor.is_some(),
            },
            self.now,
            self.now_s,
            self.cfg.lag_policy,
        );
        if verdict.lagging() {
            sm.mount.slow_listeners.fetch_add(1, Ordering::Relaxed);
            self.ctx
                .metrics
                .slow_listeners
                .get_or_create(&sm.label)
                .inc();
        }
        match verdict {
            Verdict::Follow => {}
            Verdict::End(why) => {
                self.close(key, why);
                return false;
            }
            Verdict::Switch => {
                // A pending move (fallback-override, admin) wins over the configured fallback.
                let next = match self.moves.remove(&key).filter(|m| !m.queue.load().ended) {
                    Some(m) => m,
                    None => sm.successor.clone().expect("a switch has a successor"),
                };
                self.switch(key, next);
                return true;
            }
            Verdict::SkipAhead => {
                let j = follow::join(&sm.snapshot, JoinAt::Burst(sm.mount.burst_size()));
                slot.cursor.skip_to(j.pos, j.headers.map(|h| (*h).clone()));
            }
        }
        let written = match slot.tls.as_deref_mut() {
            None => write_due(
                &slot.stream,
                &mut slot.cursor,
                &sm.snapshot,
                &sm.icy,
                max_bytes,
                &mut self.scratch,
            ),
            Some(tls) => {
                // Sealed bytes a full socket left over go first, even when nothing new is due.
                match tls.flush_tail(&slot.stream) {
                    Ok(true) => {}
                    Ok(false) => {
                        slot.backlogged = true;
                        return false;
                    }
                    Err(_) => {
                        self.close(key, EndReason::WriteFailed);
                        return false;
                    }
                }
                let w = SealingWriter {
                    inner: &slot.stream,
                    tls,
                    scratch: &mut self.seal_scratch,
                };
                write_due(
                    w,
                    &mut slot.cursor,
                    &sm.snapshot,
                    &sm.icy,
                    max_bytes,
                    &mut self.scratch,
                )
            }
        };
        match written {
            Written::Nothing => {
                slot.backlogged = false;
                if let Some(why) = decide::idle(
                    sm.snapshot.ended,
                    sm.successor.is_some(),
                    sm.awaiting_fallback,
                ) {
                    self.close(key, why);
                }
                false
            }
            Written::Bytes { bytes, whole } => {
                slot.sent += bytes as u64;
                sm.unflushed_bytes += bytes as u64;
                slot.backlogged = !whole;
                decide::more_due(whole, slot.cursor.pos, sm.snapshot.head)
            }
            Written::WouldBlock => {
                slot.backlogged = true;
                false
            }
            Written::Failed(_) => {
                self.close(key, EndReason::WriteFailed);
                false
            }
        }
    }

    fn close(&mut self, key: usize, why: EndReason) {
        self.moves.remove(&key);
        let mut slot = self.slots.remove(key);
        let _ = self.poll.registry().deregister(&mut slot.stream);
        if slot.relay {
            self.relays.retain(|&k| k != key);
        }
        let sm = self.mounts[slot.mount]
            .as_mut()
            .expect("mount of a live slot");
        sm.listeners -= 1;
        let mount = sm.mount.clone();
        if sm.listeners == 0 {
            // Flush counters, then forget the mount so its queue can be freed.
            sm.flush_bytes(&self.ctx.metrics);
            self.mounts[slot.mount] = None;
        }
        let Slot { info, sent, .. } = slot;
        self.finish(&mount, *info, sent, why);
    }

    /// Bookkeeping for a listener that is gone: counts, metrics, logs, its close hook.
    fn finish(&self, mount: &Mount, mut info: ListenerInfo, sent: u64, why: EndReason) {
        mount.remove_listener();
        self.load.fetch_sub(1, Ordering::Relaxed);
        let label = MountLabel::new(&mount.name);
        self.ctx.metrics.listeners.get_or_create(&label).dec();
        self.ctx.metrics.disconnects.get_or_create(&label).inc();
        self.ctx.metrics.count_end(info.path.as_str(), why.key());
        match why {
            EndReason::TooSlow | EndReason::WriteFailed => tracing::info!(
                mount = %mount.name, ip = %info.ip, id = info.id, "listener closed: {}", why.key()
            ),
            _ => tracing::debug!(
                mount = %mount.name, ip = %info.ip, id = info.id, "listener closed: {}", why.key()
            ),
        }
        info.log_end(
            &self.ctx.access_log,
            &mount.name,
            200,
            sent,
            Instant::now(),
            why,
        );
    }

    fn close_all(&mut self) {
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close(k, self.closing);
        }
    }
}
