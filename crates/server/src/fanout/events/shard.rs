//! An event shard: one thread owning a set of SSE subscribers, written like listeners: each
//! subscriber is a cursor on the [`EventLog`] (the id of the next event it needs), and when
//! the log moves the shard walks its subscribers and gives each one `writev` of everything new
//! for it, pointing at the events' shared [`Bytes`] (encoded once for every subscriber).
//!
//! A subscriber whose socket is full keeps the rest of a half-written event and is written
//! again when it becomes writable; one that stays full for `stall-timeout`, or falls so far
//! behind that the events it needs left the ring, is dropped and logged: it never slows the
//! others. Every `heartbeat`, each subscriber that got nothing since the previous round gets a
//! heartbeat comment (one filtered to a quiet mount too, while other mounts' events flow).
//! A subscriber costs one small slab entry here (no buffer of its own).

use std::io::{IoSlice, Read, Write};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::audience::{AudiencePath, EndReason};
use crate::fanout::events::log::{EventLog, Ring};
use crate::fanout::seal::{SealingWriter, TlsListener};
use crate::net::clients::ClientSlot;
use crate::observe::metrics::Metrics;

const WAKER: Token = Token(usize::MAX);

/// Most events gathered into one `writev`.
const MAX_IOV: usize = 64;

/// A subscriber handed to a shard, its request accepted.
#[derive(Debug)]
pub struct NewSubscriber {
    /// The connection (non-blocking).
    pub stream: std::net::TcpStream,
    /// What it gets first: the response head, `retry:` and the snapshot (or nothing more when
    /// it resumes by `Last-Event-ID`).
    pub first: Bytes,
    /// The id of the first event of the log it needs.
    pub next: u64,
    /// Only events of this mount (`?mount=`), or all.
    pub filter: Option<Arc<str>>,
    /// Client address, for the log line when it is dropped.
    pub ip: IpAddr,
    /// Its unit of the `clients` count, released when the subscriber is gone.
    pub client_slot: ClientSlot,
    /// Over HTTPS: its transmit keys; everything it is sent is sealed (`fanout/seal.rs`), as
    /// for an audio listener over TLS.
    pub tls: Option<Box<TlsListener>>,
}

/// Settings of the event shards.
#[derive(Debug, Clone, Copy)]
pub struct EventShardConfig {
    /// A heartbeat comment after this long without a write.
    pub heartbeat: Duration,
    /// A subscriber whose socket stays full this long is dropped.
    pub stall_timeout: Duration,
}

struct Sub {
    stream: TcpStream,
    /// Bytes still to write before the next event: the first bytes, or the rest of an event.
    pending: Option<Bytes>,
    next: u64,
    filter: Option<Arc<str>>,
    /// When its socket was first found full, while it stays so.
    blocked_since: Option<Instant>,
    /// Something was written to it since the last heartbeat round.
    active: bool,
    ip: IpAddr,
    _client_slot: ClientSlot,
    tls: Option<Box<TlsListener>>,
}

enum Command {
    Join(Box<NewSubscriber>),
    Shutdown,
}

/// The handle other threads use to give a shard subscribers and wake it.
#[derive(Debug)]
pub struct EventShardHandle {
    tx: mpsc::Sender<Command>,
    waker: Arc<Waker>,
    load: Arc<AtomicUsize>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl EventShardHandle {
    /// Starts event shard number `index`.
    ///
    /// Errors: the poll or the thread cannot be created.
    pub fn spawn(
        index: usize,
        cfg: EventShardConfig,
        log: Arc<EventLog>,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<EventShardHandle> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = mpsc::channel();
        let load = Arc::new(AtomicUsize::new(0));
        let seen = log.load().last;
        let mut shard = EventShard {
            poll,
            rx,
            subs: Slab::new(),
            cfg,
            log,
            metrics,
            load: load.clone(),
            seen,
            last_beat: Instant::now(),
            last_sweep: Instant::now(),
            seal_scratch: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("events-{index}"))
            .spawn(move || shard.run())?;
        Ok(EventShardHandle {
            tx,
            waker,
            load,
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Subscribers this shard holds (including ones queued to join).
    pub fn load(&self) -> usize {
        self.load.load(Ordering::Relaxed)
    }

    /// Hands a subscriber to the shard; it gets its first bytes at once.
    pub fn join(&self, s: Box<NewSubscriber>) {
        self.load.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(Command::Join(s)).is_ok() {
            let _ = self.waker.wake();
        }
    }

    /// Wakes the shard (the log moved).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Closes every subscriber and stops the thread (waits for it).
    pub fn shutdown(&self) {
        if self.tx.send(Command::Shutdown).is_ok() {
            let _ = self.waker.wake();
        }
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

struct EventShard {
    poll: Poll,
    rx: mpsc::Receiver<Command>,
    subs: Slab<Sub>,
    cfg: EventShardConfig,
    log: Arc<EventLog>,
    metrics: Arc<Metrics>,
    load: Arc<AtomicUsize>,
    /// The last log id every subscriber was offered.
    seen: u64,
    /// The last heartbeat round.
    last_beat: Instant,
    last_sweep: Instant,
    /// Records sealed for subscribers over TLS, reused across them.
    seal_scratch: Vec<u8>,
}

/// What one `writev` did.
enum Wrote {
    /// Everything offered was taken; more may be due (the gathering was cut at [`MAX_IOV`]).
    All { more: bool },
    /// The socket is full.
    Blocked,
    /// Nothing was due.
    Nothing,
    /// The subscriber must go.
    End(EndReason),
}

impl EventShard {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            let timeout = Duration::from_millis(250).min(self.cfg.heartbeat);
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::error!("event shard poll failed: {e}");
                    return;
                }
            }
            let now = Instant::now();
            let ring = self.log.load();
            for ev in events.iter() {
                let key = ev.token().0;
                if ev.token() == WAKER || !self.subs.contains(key) {
                    continue;
                }
                if (ev.is_read_closed() || ev.is_readable()) && self.hung_up(key) {
                    self.close(key, EndReason::HungUp);
                    continue;
                }
                if ev.is_writable() || ev.is_write_closed() {
                    self.write(key, &ring, now);
                }
            }
            while let Ok(cmd) = self.rx.try_recv() {
                match cmd {
                    Command::Join(s) => self.insert(*s, &ring, now),
                    Command::Shutdown => {
                        let keys: Vec<usize> = self.subs.iter().map(|(k, _)| k).collect();
                        for k in keys {
                            self.close(k, EndReason::Shutdown);
                        }
                        return;
                    }
                }
            }
            if ring.last != self.seen {
                self.seen = ring.last;
                self.walk(&ring, now, false);
            }
            if now.duration_since(self.last_beat) >= self.cfg.heartbeat {
                // Each subscriber that got nothing since the last round gets a heartbeat.
                self.walk(&ring, now, true);
                self.last_beat = now;
            }
            if now.duration_since(self.last_sweep) >= Duration::from_millis(250) {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
    }

    fn insert(&mut self, s: NewSubscriber, ring: &Ring, now: Instant) {
        let mut stream = TcpStream::from_std(s.stream);
        let key = self.subs.vacant_key();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!("cannot register event subscriber: {e}");
            self.load.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        self.metrics.event_subscribers.inc();
        self.subs.insert(Sub {
            stream,
            pending: Some(s.first),
            next: s.next,
            filter: s.filter,
            blocked_since: None,
            active: false,
            ip: s.ip,
            _client_slot: s.client_slot,
            tls: s.tls,
        });
        self.write(key, ring, now);
    }

    /// Offers every subscriber what is new for it (or a heartbeat).
    fn walk(&mut self, ring: &Ring, now: Instant, heartbeat: bool) {
        let keys: Vec<usize> = self.subs.iter().map(|(k, _)| k).collect();
        for k in keys {
            let Some(s) = self.subs.get_mut(k) else {
                continue;
            };
            if heartbeat {
                let active = std::mem::take(&mut s.active);
                if active || s.pending.is_some() || s.blocked_since.is_some() {
                    continue;
                }
                s.pending = Some(Bytes::from_static(throng_proto::sse::HEARTBEAT));
            }
            self.write(k, ring, now);
        }
    }

    /// Drops subscribers whose socket stayed full for `stall-timeout`.
    fn sweep(&mut self, now: Instant) {
        let stall = self.cfg.stall_timeout;
        let stalled: Vec<usize> = self
            .subs
            .iter()
            .filter(|(_, s)| {
                s.blocked_since
                    .is_some_and(|t| now.duration_since(t) >= stall)
            })
            .map(|(k, _)| k)
            .collect();
        for k in stalled {
            self.close(k, EndReason::TooSlow);
        }
    }

    /// Reads and discards whatever the subscriber sent; true if it hung up.
    fn hung_up(&mut self, key: usize) -> bool {
        let mut buf = [0u8; 256];
        let s = &mut self.subs[key];
        for _ in 0..16 {
            match s.stream.read(&mut buf) {
                Ok(0) => return true,
                // Over TLS a subscriber says nothing but close_notify (its keys stay with
                // the handshake's rustls, gone): anything read ends it, as for listeners.
                Ok(_) if s.tls.is_some() => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return true,
            }
        }
        false
    }

    /// Writes what the subscriber is due (a few `writev`s at most), or closes it.
    fn write(&mut self, key: usize, ring: &Ring, now: Instant) {
        for _ in 0..4 {
            match self.write_once(key, ring) {
                Wrote::All { more } => {
                    self.subs[key].blocked_since = None;
                    if !more {
                        return;
                    }
                }
                Wrote::Nothing => {
                    self.subs[key].blocked_since = None;
                    return;
                }
                Wrote::Blocked => {
                    self.subs[key].blocked_since.get_or_insert(now);
                    return;
                }
                Wrote::End(why) => {
                    self.close(key, why);
                    return;
                }
            }
        }
    }

    fn write_once(&mut self, key: usize, ring: &Ring) -> Wrote {
        let s = &mut self.subs[key];
        if let Some(tls) = s.tls.as_deref_mut() {
            // Sealed bytes a full socket left over go before anything new.
            match tls.flush_tail(&s.stream) {
                Ok(true) => {}
                Ok(false) => return Wrote::Blocked,
                Err(_) => return Wrote::End(EndReason::WriteFailed),
            }
        }
        if s.next < ring.first() {
            // The events it needs left the ring: it is too far behind to catch up.
            return Wrote::End(EndReason::TooSlow);
        }
        let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(8);
        let mut seqs: Vec<u64> = Vec::with_capacity(8);
        if let Some(p) = &s.pending {
            iov.push(IoSlice::new(p));
        }
        let mut scanned_to = s.next;
        let mut more = false;
        for e in ring.from(s.next) {
            if iov.len() >= MAX_IOV {
                more = true;
                break;
            }
            scanned_to = e.seq + 1;
            if s.filter.as_ref().is_none_or(|f| **f == *e.mount) {
                iov.push(IoSlice::new(&e.bytes));
                seqs.push(e.seq);
            }
        }
        if iov.is_empty() {
            s.next = scanned_to;
            return Wrote::Nothing;
        }
        let total: usize = iov.iter().map(|b| b.len()).sum();
        let wrote = match s.tls.as_deref_mut() {
            None => (&s.stream).write_vectored(&iov),
            // Sealed as one or a few records; all of it counts as taken once any went out.
            Some(tls) => SealingWriter {
                inner: &s.stream,
                tls,
                scratch: &mut self.seal_scratch,
            }
            .write_vectored(&iov),
        };
        let n = match wrote {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Wrote::Blocked,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Wrote::Blocked,
            Err(_) => return Wrote::End(EndReason::WriteFailed),
        };
        drop(iov);
        s.active |= n > 0;
        let whole = n == total;
        // Advance past what the kernel took.
        let mut left = n;
        if let Some(p) = s.pending.take() {
            if left >= p.len() {
                left -= p.len();
            } else {
                s.pending = Some(p.slice(left..));
                return Wrote::Blocked;
            }
        }
        let mut sent = 0u64;
        if whole {
            sent = seqs.len() as u64;
            s.next = scanned_to;
        } else {
            for seq in &seqs {
                let e = ring
                    .from(*seq)
                    .next()
                    .expect("a gathered event is retained");
                if left >= e.bytes.len() {
                    left -= e.bytes.len();
                    sent += 1;
                    s.next = seq + 1;
                } else {
                    if left > 0 {
                        s.pending = Some(e.bytes.slice(left..));
                        sent += 1;
                        s.next = seq + 1;
                    } else {
                        s.next = *seq;
                    }
                    break;
                }
            }
        }
        self.metrics.events_sent.inc_by(sent);
        if whole {
            Wrote::All { more }
        } else {
            Wrote::Blocked
        }
    }

    fn close(&mut self, key: usize, why: EndReason) {
        let mut s = self.subs.remove(key);
        let _ = self.poll.registry().deregister(&mut s.stream);
        self.load.fetch_sub(1, Ordering::Relaxed);
        self.metrics.event_subscribers.dec();
        self.metrics
            .count_end(AudiencePath::Events.as_str(), why.key());
        match why {
            EndReason::TooSlow => {
                self.metrics.event_subscribers_dropped.inc();
                tracing::info!(ip = %s.ip, "event subscriber dropped: too slow");
            }
            EndReason::WriteFailed => tracing::debug!(ip = %s.ip, "event subscriber: write error"),
            _ => {}
        }
    }
}
