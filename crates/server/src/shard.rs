//! A fan-out shard: one thread owning a set of listeners, walking them on a timer.
//!
//! Each shard has its own `mio` poll. Listeners are split into [`BUCKETS`] buckets by slab key;
//! every `write-interval / BUCKETS` the shard walks one bucket, so each listener gets one
//! coalesced `writev` per write interval (about one per second) holding everything new since the
//! last: shared chunks, never copied, with ICY blocks interleaved. A listener only gets an extra
//! write when its socket was full and becomes writable again. Read readiness is used to notice a
//! listener hanging up at once. No lock is shared by the listeners: a shard loads each mount's
//! queue snapshot once per tick.

use std::io::Read;
use std::net::IpAddr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::access_log::{AccessEntry, AccessLog};
use crate::config::LagPolicy;
use crate::cursor::{Cursor, IcyMeta, SegKind};
use crate::metrics::{Metrics, MountLabel};
use crate::mount::Mount;
use crate::ring::Ring;
use crate::write_path::{write_due, Written};

/// Buckets per write interval: a listener is visited once per interval, in the bucket
/// `key % BUCKETS`, so the shard's work is spread evenly over time.
pub const BUCKETS: usize = 10;

/// How long listeners of an ended mount may take to drain what is left; a listener that has
/// stopped reading (a paused player) is closed after it, so it does not hold its slot and the
/// mount's queue forever.
pub const ENDED_GRACE: Duration = Duration::from_secs(10);

/// Most `writev` calls for one listener in one visit, when each one is taken whole and more is
/// due (a large burst, or a listener catching up).
pub const MAX_WRITES_PER_VISIT: usize = 4;

const WAKER: Token = Token(usize::MAX);

/// What a shard needs to know about a listener's request, for the access log and admin lists.
#[derive(Debug)]
pub struct ListenerInfo {
    /// Listener id, unique in this process.
    pub id: u64,
    /// Client address.
    pub ip: IpAddr,
    /// Request line as logged.
    pub request_line: String,
    /// `User-Agent`, if sent.
    pub agent: Option<String>,
    /// `Referer`, if sent.
    pub referer: Option<String>,
    /// When the request arrived.
    pub started: Instant,
}

/// A listener handed to a shard after its request was accepted.
#[derive(Debug)]
pub struct NewListener {
    /// The connection (non-blocking).
    pub stream: std::net::TcpStream,
    /// The mount it listens to (a listener slot is already taken).
    pub mount: Arc<Mount>,
    /// Response head bytes, sent before the stream.
    pub head: Bytes,
    /// ICY metadata interval, if the listener asked for metadata.
    pub metaint: Option<u32>,
    /// Request facts.
    pub info: ListenerInfo,
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
#[derive(Debug, Clone)]
pub struct ShardContext {
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Access log.
    pub access_log: AccessLog,
    /// Open connections of any kind (the `clients` limit).
    pub clients: Arc<AtomicI64>,
}

enum Command {
    Join(Box<NewListener>),
    Shutdown,
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
            Command::Shutdown => "Shutdown",
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
        let mut shard = Shard {
            poll,
            rx,
            slots: Slab::new(),
            mounts: Vec::new(),
            cfg,
            ctx,
            load: load.clone(),
            scratch: Vec::new(),
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

    /// Closes every listener and stops the thread.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

struct Slot {
    stream: TcpStream,
    mount: usize,
    cursor: Cursor,
    sent: u64,
    backlogged: bool,
    info: Box<ListenerInfo>,
}

struct ShardMount {
    mount: Arc<Mount>,
    label: MountLabel,
    ring: Arc<Ring>,
    icy: Arc<IcyMeta>,
    listeners: usize,
    unflushed_bytes: u64,
    /// When this shard first saw the feed ended.
    ended_at: Option<Instant>,
}

impl ShardMount {
    fn refresh(&mut self) {
        self.ring = self.mount.feed.load();
        self.icy = self.mount.icy.load_full();
        if self.ring.ended && self.ended_at.is_none() {
            self.ended_at = Some(Instant::now());
        }
    }

    /// The feed ended more than [`ENDED_GRACE`] ago.
    fn grace_over(&self) -> bool {
        self.ended_at.is_some_and(|t| t.elapsed() > ENDED_GRACE)
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

/// Why a listener is closed.
#[derive(Debug, Clone, Copy)]
enum Close {
    HungUp,
    WriteError,
    TooSlow,
    SourceEnded,
    Shutdown,
}

impl Close {
    fn as_str(self) -> &'static str {
        match self {
            Close::HungUp => "listener hung up",
            Close::WriteError => "write error",
            Close::TooSlow => "fell too far behind (lag over queue-size)",
            Close::SourceEnded => "source ended",
            Close::Shutdown => "server shutting down",
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
}

impl Shard {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let tick = self.cfg.write_interval / BUCKETS as u32;
        let mut next_tick = Instant::now() + tick;
        let mut bucket = 0usize;
        loop {
            let timeout = next_tick.saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    // Never give up the shard: its listeners and counts live here.
                    tracing::error!("fan-out poll failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            }
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
                    self.close(key, Close::HungUp);
                    continue;
                }
                if ev.is_writable() && self.slots[key].backlogged {
                    self.write(key);
                }
            }
            if woken && !self.commands() {
                self.close_all();
                return;
            }
            let now = Instant::now();
            if now >= next_tick {
                self.refresh_mounts();
                self.walk_bucket(bucket);
                bucket = (bucket + 1) % BUCKETS;
                next_tick += tick;
                if next_tick < now {
                    next_tick = now + tick;
                }
            }
        }
    }

    /// Handles queued commands; false on shutdown.
    fn commands(&mut self) -> bool {
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Join(l) => self.add(*l),
                Command::Shutdown => return false,
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
            ring: mount.feed.load(),
            icy: mount.icy.load_full(),
            listeners: 0,
            unflushed_bytes: 0,
            ended_at: None,
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
            metaint,
            info,
        } = l;
        let mi = self.mount_index(&mount);
        let sm = self.mounts[mi].as_mut().expect("just inserted");
        sm.refresh();
        sm.listeners += 1;
        let (pos, ogg_headers) = sm.ring.join_point(mount.settings.burst_size);
        let prefix = match ogg_headers {
            Some(h) => {
                let mut p = Vec::with_capacity(head.len() + h.len());
                p.extend_from_slice(&head);
                p.extend_from_slice(&h);
                Bytes::from(p)
            }
            None => head,
        };
        let mut stream = TcpStream::from_std(stream);
        let key = self.slots.vacant_key();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!("cannot register listener: {e}");
            sm.listeners -= 1;
            if sm.listeners == 0 {
                self.mounts[mi] = None;
            }
            self.finish(mount.as_ref(), &info, 0, Close::WriteError);
            return;
        }
        self.slots.insert(Slot {
            stream,
            mount: mi,
            cursor: Cursor::new(pos, prefix, metaint),
            sent: 0,
            backlogged: false,
            info: Box::new(info),
        });
        // Head and burst go out at once: time to first byte is one writev after the request.
        self.write(key);
    }

    fn refresh_mounts(&mut self) {
        for sm in self.mounts.iter_mut().flatten() {
            sm.refresh();
            sm.flush_bytes(&self.ctx.metrics);
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

    /// Reads and discards whatever the listener sent; true if it hung up.
    fn hung_up(&mut self, key: usize) -> bool {
        let mut buf = [0u8; 512];
        let slot = &mut self.slots[key];
        for _ in 0..16 {
            match slot.stream.read(&mut buf) {
                Ok(0) => return true,
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

    /// One `writev`; true when it was taken whole and the listener may have more due.
    fn write_once(&mut self, key: usize) -> bool {
        let slot = &mut self.slots[key];
        let sm = self.mounts[slot.mount]
            .as_mut()
            .expect("mount of a live slot");
        if sm.grace_over() {
            self.close(key, Close::SourceEnded);
            return false;
        }
        if slot.cursor.pos < sm.ring.tail() && !slot.cursor.has_pending() {
            sm.mount.slow_listeners.fetch_add(1, Ordering::Relaxed);
            self.ctx
                .metrics
                .slow_listeners
                .get_or_create(&sm.label)
                .inc();
            match self.cfg.lag_policy {
                LagPolicy::Drop => {
                    self.close(key, Close::TooSlow);
                    return false;
                }
                LagPolicy::Skip => {
                    let (pos, headers) = sm.ring.join_point(sm.mount.settings.burst_size);
                    slot.cursor.skip_to(pos, headers.map(|h| (*h).clone()));
                }
            }
        }
        match write_due(
            &slot.stream,
            &mut slot.cursor,
            &sm.ring,
            &sm.icy,
            &mut self.scratch,
        ) {
            Written::Nothing => {
                slot.backlogged = false;
                if sm.ring.ended {
                    self.close(key, Close::SourceEnded);
                }
                false
            }
            Written::Bytes { bytes, whole } => {
                slot.sent += bytes as u64;
                sm.unflushed_bytes += bytes as u64;
                slot.backlogged = !whole;
                whole && slot.cursor.pos < sm.ring.head
            }
            Written::WouldBlock => {
                slot.backlogged = true;
                false
            }
            Written::Failed(_) => {
                self.close(key, Close::WriteError);
                false
            }
        }
    }

    fn close(&mut self, key: usize, why: Close) {
        let mut slot = self.slots.remove(key);
        let _ = self.poll.registry().deregister(&mut slot.stream);
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
        self.finish(&mount, &slot.info, slot.sent, why);
        drop(slot);
    }

    /// Bookkeeping for a listener that is gone: counts, metrics, logs.
    fn finish(&self, mount: &Mount, info: &ListenerInfo, sent: u64, why: Close) {
        mount.remove_listener();
        self.load.fetch_sub(1, Ordering::Relaxed);
        self.ctx.clients.fetch_sub(1, Ordering::Relaxed);
        self.ctx.metrics.clients.dec();
        let label = MountLabel::new(&mount.name);
        self.ctx.metrics.listeners.get_or_create(&label).dec();
        self.ctx.metrics.disconnects.get_or_create(&label).inc();
        let secs = info.started.elapsed().as_secs();
        match why {
            Close::TooSlow | Close::WriteError => tracing::info!(
                mount = %mount.name, ip = %info.ip, id = info.id, "listener closed: {}", why.as_str()
            ),
            _ => tracing::debug!(
                mount = %mount.name, ip = %info.ip, id = info.id, "listener closed: {}", why.as_str()
            ),
        }
        self.ctx.access_log.log(&AccessEntry {
            ip: info.ip,
            user: None,
            request_line: &info.request_line,
            status: 200,
            bytes: sent,
            referer: info.referer.as_deref(),
            agent: info.agent.as_deref(),
            duration_secs: secs,
        });
    }

    fn close_all(&mut self) {
        let keys: Vec<usize> = self.slots.iter().map(|(k, _)| k).collect();
        for k in keys {
            self.close(k, Close::Shutdown);
        }
    }
}
