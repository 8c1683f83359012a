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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::audience::{AudiencePath, EndReason, ListenerInfo};
use crate::fanout::events::log::{EventLog, Ring};
use crate::fanout::seal::{SealingWriter, TlsListener};
use crate::net::clients::ClientSlot;
use crate::observe::access_log::AccessLog;
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
    /// The subscriber's request facts (path `events`), for its access-log line, written when
    /// it ends with its bytes, duration and end reason, as a listener's is.
    pub info: ListenerInfo,
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
    info: ListenerInfo,
    /// Bytes written to it (first bytes, events, heartbeats).
    sent: u64,
    client_slot: ClientSlot,
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
        access_log: AccessLog,
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
            access_log,
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
    /// Where a subscriber's line goes when it ends.
    access_log: AccessLog,
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
            info: s.info,
            sent: 0,
            client_slot: s.client_slot,
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
                let next = s.next;
                self.write(k, ring, now);
                // A heartbeat alone does not make the subscriber active: an idle stream gets
                // one every round (`heartbeat-ms`), not every second round.
                if let Some(s) = self.subs.get_mut(k) {
                    if s.next == next {
                        s.active = false;
                    }
                }
                continue;
            }
            self.write(k, ring, now);
        }
    }

    /// Drops subscribers whose socket stayed full for `stall-timeout`, and closes those whose
    /// `clients` unit a new request took (idle, the idlest first: `net/clients.rs`).
    fn sweep(&mut self, now: Instant) {
        let stall = self.cfg.stall_timeout;
        let ended: Vec<(usize, EndReason)> = self
            .subs
            .iter()
            .filter_map(|(k, s)| {
                if s.client_slot.is_evicted() {
                    Some((k, EndReason::Evicted))
                } else {
                    let stalled = s
                        .blocked_since
                        .is_some_and(|t| now.duration_since(t) >= stall);
                    stalled.then_some((k, EndReason::TooSlow))
                }
            })
            .collect();
        for (k, why) in ended {
            self.close(k, why);
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
        s.sent += n as u64;
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
                tracing::info!(ip = %s.info.ip, "event subscriber dropped: too slow");
            }
            EndReason::WriteFailed => {
                tracing::debug!(ip = %s.info.ip, "event subscriber: write error")
            }
            EndReason::Evicted => {
                tracing::info!(ip = %s.info.ip, "event subscriber closed: idle, its clients slot taken by a new client")
            }
            _ => {}
        }
        // Its line, as a listener's: the filter as its mount, bytes, duration, end reason.
        let mount = s.filter.as_deref().unwrap_or("-").to_owned();
        s.info
            .log_end(&self.access_log, &mount, 200, s.sent, Instant::now(), why);
    }
}

#[cfg(test)]
mod tests {
    //! The shard driven by hand (no thread): real loopback sockets, simulated `Instant`s.

    use super::*;
    use crate::fanout::events::log::RING;
    use crate::net::clients::Clients;
    use crate::observe::metrics::EndLabel;

    const STALL: Duration = Duration::from_secs(10);

    fn shard(log: &Arc<EventLog>) -> EventShard {
        let now = Instant::now();
        EventShard {
            poll: Poll::new().unwrap(),
            rx: mpsc::channel().1,
            subs: Slab::new(),
            cfg: EventShardConfig {
                heartbeat: Duration::from_secs(15),
                stall_timeout: STALL,
            },
            log: log.clone(),
            metrics: Arc::new(Metrics::new()),
            access_log: AccessLog::open("").unwrap(),
            load: Arc::new(AtomicUsize::new(0)),
            seen: log.load().last,
            last_beat: now,
            last_sweep: now,
            seal_scratch: Vec::new(),
        }
    }

    /// A connected loopback pair: (the subscriber's socket, non-blocking; the client's end).
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        (server, client)
    }

    /// Joins a subscriber as [`EventShardHandle::join`] and the shard loop do; returns its key
    /// and the client's end of its connection.
    fn join(
        sh: &mut EventShard,
        first: &'static [u8],
        next: u64,
        filter: Option<&str>,
        now: Instant,
    ) -> (usize, std::net::TcpStream) {
        let (server, client) = pair();
        let key = sh.subs.vacant_key();
        sh.load.fetch_add(1, Ordering::Relaxed);
        let ring = sh.log.load();
        sh.insert(
            NewSubscriber {
                stream: server,
                first: Bytes::from_static(first),
                next,
                filter: filter.map(Arc::from),
                info: ListenerInfo {
                    id: 1,
                    path: AudiencePath::Events,
                    ip: "127.0.0.1".parse().unwrap(),
                    request_line: "GET /api/v1/events HTTP/1.1".into(),
                    agent: None,
                    referer: None,
                    started: now,
                    requested_mount: filter.unwrap_or("").into(),
                    user: None,
                    deadline: None,
                    on_close: None,
                    ledger: None,
                },
                client_slot: Clients::new(100, Default::default()).admit().0,
                tls: None,
            },
            &ring,
            now,
        );
        (key, client)
    }

    /// What the client received until the shard closed its connection.
    fn received(mut client: std::net::TcpStream) -> Vec<u8> {
        let mut out = Vec::new();
        client.read_to_end(&mut out).unwrap();
        out
    }

    /// The encoded events of `ring` from `next` on, about `mount` when given, concatenated.
    fn events(ring: &Ring, next: u64, mount: Option<&str>) -> Vec<u8> {
        ring.from(next)
            .filter(|e| mount.is_none_or(|m| *e.mount == *m))
            .flat_map(|e| e.bytes.to_vec())
            .collect()
    }

    fn ended(sh: &EventShard, why: EndReason) -> u64 {
        sh.metrics
            .session_ends
            .get_or_create(&EndLabel {
                path: "events",
                reason: why.key(),
            })
            .get()
    }

    fn walk(sh: &mut EventShard, now: Instant, heartbeat: bool) {
        let ring = sh.log.load();
        sh.walk(&ring, now, heartbeat);
    }

    #[test]
    fn subscribers_get_their_first_bytes_then_each_event_of_their_filter_once() {
        let log = Arc::new(EventLog::new(1000));
        let (a, b): (Arc<str>, Arc<str>) = ("/a".into(), "/b".into());
        let mut sh = shard(&log);
        let now = Instant::now();
        let (all, all_c) = join(&mut sh, b"HEAD-ALL\n", 1001, None, now);
        let (only_a, a_c) = join(&mut sh, b"HEAD-A\n", 1001, Some("/a"), now);
        assert_eq!(sh.metrics.event_subscribers.get(), 2);
        log.publish(&a, "title", "{\"n\":1}");
        log.publish(&b, "title", "{\"n\":2}");
        walk(&mut sh, now, false);
        log.publish(&a, "title", "{\"n\":3}");
        walk(&mut sh, now, false);
        // Nothing new: a walk sends nothing again.
        walk(&mut sh, now, false);
        let ring = log.load();
        assert_eq!(sh.subs[all].next, 1004);
        assert_eq!(
            sh.subs[only_a].next, 1004,
            "skips past the other mount's events"
        );
        assert_eq!(sh.metrics.events_sent.get(), 3 + 2);
        sh.close(all, EndReason::Shutdown);
        sh.close(only_a, EndReason::Shutdown);
        assert_eq!(sh.load.load(Ordering::Relaxed), 0);
        assert_eq!(sh.metrics.event_subscribers.get(), 0);
        assert_eq!(ended(&sh, EndReason::Shutdown), 2);
        let mut want = b"HEAD-ALL\n".to_vec();
        want.extend(events(&ring, 1001, None));
        assert_eq!(received(all_c), want);
        let mut want = b"HEAD-A\n".to_vec();
        want.extend(events(&ring, 1001, Some("/a")));
        assert_eq!(received(a_c), want);
    }

    #[test]
    fn heartbeats_go_only_to_subscribers_that_got_nothing_since_the_last_round() {
        let log = Arc::new(EventLog::new(0));
        let a: Arc<str> = "/a".into();
        let mut sh = shard(&log);
        let now = Instant::now();
        let (busy, busy_c) = join(&mut sh, b"H1\n", 1, Some("/a"), now);
        let (quiet, quiet_c) = join(&mut sh, b"H2\n", 1, Some("/quiet"), now);
        // Round 1: both got their first bytes since the start.
        walk(&mut sh, now, true);
        log.publish(&a, "title", "{}");
        walk(&mut sh, now, false);
        // Round 2: only the one filtered to a quiet mount gets a heartbeat.
        walk(&mut sh, now, true);
        let ring = log.load();
        sh.close(busy, EndReason::Shutdown);
        sh.close(quiet, EndReason::Shutdown);
        let hb = throng_proto::sse::HEARTBEAT;
        let mut want = b"H1\n".to_vec();
        want.extend(events(&ring, 1, None));
        assert_eq!(received(busy_c), want);
        let mut want = b"H2\n".to_vec();
        want.extend(hb);
        assert_eq!(received(quiet_c), want);
    }

    /// `[events] heartbeat-ms`: "an idle stream gets a `: heartbeat` comment every
    /// heartbeat-ms" (docs/operators.md). The heartbeat does not itself mark the subscriber
    /// active (it did: an idle subscriber got one every second round).
    #[test]
    fn an_idle_subscriber_gets_a_heartbeat_every_round() {
        let log = Arc::new(EventLog::new(0));
        let mut sh = shard(&log);
        let now = Instant::now();
        let (k, c) = join(&mut sh, b"H\n", 1, None, now);
        for _ in 0..4 {
            walk(&mut sh, now, true);
        }
        sh.close(k, EndReason::Shutdown);
        // Round 1 skips it (its first bytes went out since the start); rounds 2 to 4 do not.
        let mut want = b"H\n".to_vec();
        for _ in 0..3 {
            want.extend(throng_proto::sse::HEARTBEAT);
        }
        assert_eq!(received(c), want);
    }

    #[test]
    fn one_write_is_bounded_and_the_rest_follows() {
        let log = Arc::new(EventLog::new(0));
        let a: Arc<str> = "/a".into();
        for i in 0..300 {
            log.publish(&a, "title", &format!("{{\"n\":{i}}}"));
        }
        let mut sh = shard(&log);
        let now = Instant::now();
        // A subscriber resuming from the start of the ring: 300 events due at once.
        let (k, c) = join(&mut sh, b"HEAD\n", 1, None, now);
        // At most four `writev`s of MAX_IOV slices each (the first bytes take one slice).
        let budget = 4 * MAX_IOV as u64 - 1;
        assert_eq!(sh.subs[k].next, 1 + budget);
        assert_eq!(sh.metrics.events_sent.get(), budget);
        assert!(sh.subs[k].blocked_since.is_none());
        // The next offer (a new event, or a heartbeat round) sends the rest.
        log.publish(&a, "title", "{\"n\":300}");
        walk(&mut sh, now, false);
        assert_eq!(sh.subs[k].next, 302);
        assert_eq!(sh.metrics.events_sent.get(), 301);
        let ring = log.load();
        sh.close(k, EndReason::Shutdown);
        let mut want = b"HEAD\n".to_vec();
        want.extend(events(&ring, 1, None));
        assert_eq!(received(c), want);
    }

    #[test]
    fn a_subscriber_whose_events_left_the_ring_is_dropped_too_slow() {
        let log = Arc::new(EventLog::new(0));
        let a: Arc<str> = "/a".into();
        let mut sh = shard(&log);
        let now = Instant::now();
        let (keep, _keep_c) = join(&mut sh, b"H\n", 1, None, now);
        let (behind, behind_c) = join(&mut sh, b"H\n", 1, None, now);
        walk(&mut sh, now, false);
        // The ring holds RING events: exactly the oldest one `behind` needs is still there.
        for _ in 0..RING {
            log.publish(&a, "title", "{}");
            sh.write(keep, &log.load(), now);
        }
        assert_eq!(sh.subs[keep].next, RING as u64 + 1);
        // One more and the event `behind` needs is gone.
        log.publish(&a, "title", "{}");
        let ring = log.load();
        assert_eq!(ring.first(), 2);
        sh.write(behind, &ring, now);
        assert!(!sh.subs.contains(behind));
        assert!(sh.subs.contains(keep), "the others are not slowed");
        assert_eq!(sh.metrics.event_subscribers_dropped.get(), 1);
        assert_eq!(ended(&sh, EndReason::TooSlow), 1);
        assert_eq!(sh.load.load(Ordering::Relaxed), 1);
        assert_eq!(
            received(behind_c),
            b"H\n",
            "closed without a partial replay"
        );
    }

    /// Shrinks the socket buffers of subscriber `key`'s connection, so it fills quickly.
    fn small_buffers(sh: &EventShard, key: usize, client: &std::net::TcpStream) {
        socket2::SockRef::from(client)
            .set_recv_buffer_size(4096)
            .unwrap();
        socket2::SockRef::from(&sh.subs[key].stream)
            .set_send_buffer_size(4096)
            .unwrap();
    }

    /// Publishes 64 KiB events and offers them until the subscriber's socket is full; returns
    /// how many were published.
    fn fill(sh: &mut EventShard, key: usize, now: Instant) -> usize {
        let big = "x".repeat(64 * 1024);
        let a: Arc<str> = "/a".into();
        for n in 1..RING {
            sh.log.publish(&a, "title", &big);
            walk(sh, now, false);
            if sh.subs[key].blocked_since.is_some() {
                return n;
            }
        }
        panic!("the socket never filled");
    }

    #[test]
    fn a_subscriber_whose_socket_stays_full_is_dropped_after_the_stall_timeout() {
        let log = Arc::new(EventLog::new(0));
        let mut sh = shard(&log);
        let t0 = Instant::now();
        let (k, c) = join(&mut sh, b"H\n", 1, None, t0);
        small_buffers(&sh, k, &c);
        fill(&mut sh, k, t0);
        assert_eq!(sh.subs[k].blocked_since, Some(t0));
        // Still full later: the stall counts from when it was first found full.
        let t1 = t0 + Duration::from_secs(5);
        walk(&mut sh, t1, false);
        sh.write(k, &log.load(), t1);
        assert_eq!(sh.subs[k].blocked_since, Some(t0));
        sh.sweep(t0 + STALL - Duration::from_millis(1));
        assert!(sh.subs.contains(k));
        sh.sweep(t0 + STALL);
        assert!(!sh.subs.contains(k));
        assert_eq!(sh.metrics.event_subscribers_dropped.get(), 1);
        assert_eq!(ended(&sh, EndReason::TooSlow), 1);
        assert_eq!(sh.load.load(Ordering::Relaxed), 0);
        drop(c);
    }

    #[test]
    fn partial_writes_lose_and_repeat_nothing() {
        let log = Arc::new(EventLog::new(0));
        let mut sh = shard(&log);
        let t0 = Instant::now();
        let (k, c) = join(&mut sh, b"HEAD\n", 1, None, t0);
        // Only the sending side is shrunk: a receive buffer under the segment size would leave
        // the sender waiting for window probes once the client reads.
        socket2::SockRef::from(&sh.subs[k].stream)
            .set_send_buffer_size(4096)
            .unwrap();
        fill(&mut sh, k, t0);
        // The client starts reading: each time the socket is writable again, the shard goes on
        // from where the kernel stopped taking bytes (the rest of a half-written event first).
        let reader = std::thread::spawn(move || received(c));
        let mut events_buf = Events::with_capacity(16);
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..100_000 {
            let s = &sh.subs[k];
            if s.pending.is_none() && s.next == log.load().last + 1 {
                break;
            }
            sh.poll
                .poll(&mut events_buf, Some(Duration::from_secs(10)))
                .unwrap();
            sh.write(k, &log.load(), t1);
        }
        let s = &sh.subs[k];
        assert!(s.pending.is_none() && s.blocked_since.is_none());
        let ring = log.load();
        assert_eq!(sh.metrics.events_sent.get(), ring.last);
        sh.close(k, EndReason::Shutdown);
        let mut want = b"HEAD\n".to_vec();
        want.extend(events(&ring, 1, None));
        let got = reader.join().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(
            got == want,
            "the bytes received are the events, in order, once each"
        );
    }

    #[test]
    fn a_subscriber_that_closes_has_hung_up_and_one_that_talks_has_not() {
        let log = Arc::new(EventLog::new(0));
        let mut sh = shard(&log);
        let now = Instant::now();
        let (talks, mut talks_c) = join(&mut sh, b"H\n", 1, None, now);
        let (gone, gone_c) = join(&mut sh, b"H\n", 1, None, now);
        talks_c.write_all(b"ignored bytes").unwrap();
        drop(gone_c);
        // Block until both arrived: the poll reports the two sockets readable.
        let mut seen = std::collections::HashSet::new();
        let mut events_buf = Events::with_capacity(16);
        while seen.len() < 2 {
            sh.poll
                .poll(&mut events_buf, Some(Duration::from_secs(10)))
                .unwrap();
            for ev in events_buf.iter() {
                if ev.is_readable() || ev.is_read_closed() {
                    seen.insert(ev.token().0);
                }
            }
        }
        assert!(!sh.hung_up(talks));
        assert!(sh.hung_up(gone));
    }
}
