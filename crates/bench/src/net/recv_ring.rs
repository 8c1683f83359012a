//! Streaming sockets read through io_uring: one multishot receive per socket into a ring of
//! provided buffers, completions reaped in batches (the ICY engine's receive path, issue 37).
//!
//! With epoll, every server write to a listener costs the bench a readiness callback, a share
//! of `epoll_wait`, an `fd` lookup and a `recvfrom` system call. Here a socket is armed once
//! (`IORING_OP_RECV` with `IORING_RECV_MULTISHOT` and `IOSQE_BUFFER_SELECT`, kernel 6.0+); the
//! kernel picks a buffer of the ring for each receive and posts a completion naming it, and the
//! ring is set up with `IORING_SETUP_DEFER_TASKRUN` (6.1+), so the receives of every socket
//! that got data run together when the engine next waits, in its own thread, one system call
//! for all of them. The engine walks each completion's bytes in place and the buffer goes back
//! to the ring (liburing's `io_uring_buf_ring_add` protocol: entries at the tail, the tail
//! published with release ordering).
//!
//! The kernel runs at most 20 deferred receives per `io_uring_enter` (`IO_LOCAL_TW_DEFAULT_MAX`,
//! io_uring/io_uring.c since 6.13); the rest wait for the next call. So after a wait the
//! engine reaps and calls [`RecvRing::run_ready`] until a call yields nothing: about one
//! system call per 20 sockets with data, whose bytes are still in cache when they are walked.
//!
//! The ring also watches one other file, the engine's epoll instance (`watch`), so one wait
//! covers both the sockets still connecting (epoll) and the streaming ones (the ring).
//!
//! Errors: [`RecvRing::new`] fails where io_uring is unavailable (an old kernel,
//! `kernel.io_uring_disabled`, a container's seccomp profile); the engine then stays on epoll.
//! A receive's own error arrives as [`Recv::Error`]; a full buffer ring as [`Recv::NoBuffers`]
//! (the socket's multishot ends; arm it again once buffers are back).

use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

/// The buffer group id of the ring's buffers.
const BGID: u16 = 0;
/// Submission queue entries.
const SQ_ENTRIES: u32 = 4096;
/// Completion queue entries: the completions of one wait (one per socket that got data).
const CQ_ENTRIES: u32 = 32_768;
/// The `user_data` of cancel requests (their completions are ignored).
const CANCEL_KEY: u64 = u64::MAX;
/// `IORING_ENTER_GETEVENTS` (include/uapi/linux/io_uring.h): run deferred receives, post
/// their completions.
const ENTER_GETEVENTS: u32 = 1;

/// What one completion says of an armed socket (`key`: the value given to
/// [`RecvRing::arm`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Recv<'a> {
    /// Bytes received.
    Data(&'a [u8]),
    /// The peer closed the connection (a receive of 0 bytes).
    Closed,
    /// The buffer ring was empty: this socket's multishot receive ended; arm it again.
    NoBuffers,
    /// The receive failed with this `errno`.
    Error(i32),
    /// The watched file ([`RecvRing::watch`]) is readable.
    Watched,
}

/// A provided-buffer ring: the ring of 16-byte entries the kernel takes buffers from
/// (page-aligned, zero-filled: an anonymous mapping) and the buffers themselves.
struct Buffers {
    ring: *mut BufRingEntry,
    ring_len: usize,
    slab: Vec<u8>,
    buf_len: usize,
    mask: u16,
    /// The next tail to publish (entries before it are the kernel's).
    tail: u16,
}

impl Buffers {
    fn new(count: u16, buf_len: usize) -> io::Result<Buffers> {
        if !count.is_power_of_two() || count > 32_768 || buf_len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let ring_len = std::mem::size_of::<BufRingEntry>() * usize::from(count);
        // SAFETY: an anonymous private mapping of `ring_len` bytes; checked for failure.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut b = Buffers {
            ring: ring.cast(),
            ring_len,
            slab: vec![0u8; usize::from(count) * buf_len],
            buf_len,
            mask: count - 1,
            tail: 0,
        };
        for bid in 0..count {
            b.give(bid);
        }
        b.publish();
        Ok(b)
    }

    /// Puts buffer `bid` at the ring's local tail (seen by the kernel at [`Buffers::publish`]).
    fn give(&mut self, bid: u16) {
        let at = usize::from(self.tail & self.mask);
        let addr = self.slab.as_ptr() as u64 + u64::from(bid) * self.buf_len as u64;
        // SAFETY: `at` is below the ring's entry count; the mapping lives as long as `self`.
        let e = unsafe { &mut *self.ring.add(at) };
        e.set_addr(addr);
        e.set_len(self.buf_len as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes the local tail to the kernel (release: the entries are written first).
    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's `resv`, a valid aligned u16 of the
        // live mapping, which the kernel only reads.
        let tail = unsafe { &*(BufRingEntry::tail(self.ring).cast::<AtomicU16>()) };
        tail.store(self.tail, Ordering::Release);
    }

    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * self.buf_len;
        &self.slab[start..start + len.min(self.buf_len)]
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of that length, unmapped once.
        unsafe {
            libc::munmap(self.ring.cast(), self.ring_len);
        }
    }
}

/// One engine's io_uring: multishot receives of its streaming sockets into one buffer ring.
/// Single-threaded: made, fed and reaped by the thread that runs the engine
/// (`IORING_SETUP_SINGLE_ISSUER`).
pub struct RecvRing {
    // Declared before `bufs`: the ring (and every receive in flight) goes first on drop.
    ring: IoUring,
    bufs: Buffers,
    /// Entries not yet in the submission queue (it was full).
    backlog: Vec<squeue::Entry>,
}

impl RecvRing {
    /// Sets up a ring with `count` buffers (a power of two, at most 32,768) of `buf_len` bytes
    /// each. Errors: io_uring, deferred task running or buffer rings unsupported or refused.
    pub fn new(count: u16, buf_len: usize) -> io::Result<RecvRing> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)?;
        let bufs = Buffers::new(count, buf_len)?;
        // SAFETY: the buffer ring's mapping and slab live in `bufs`, which outlives `ring`
        // (field order), and are never moved (heap and mmap memory).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(bufs.ring as u64, count, BGID, 0)?;
        }
        Ok(RecvRing {
            ring,
            bufs,
            backlog: Vec::new(),
        })
    }

    fn push(&mut self, e: squeue::Entry) {
        // SAFETY: the entries reference no user memory (multishot receives select ring
        // buffers; polls and cancels carry no pointers).
        if unsafe { self.ring.submission().push(&e) }.is_err() {
            self.backlog.push(e);
        }
    }

    /// Arms a multishot receive on socket `fd`; its completions carry `key` (any value but
    /// `u64::MAX`). The socket must stay open until its receive ends (a completion without
    /// more to come) or is cancelled.
    pub fn arm(&mut self, fd: RawFd, key: u64) {
        self.push(opcode::RecvMulti::new(Fd(fd), BGID).build().user_data(key));
    }

    /// Cancels the receive armed with `key` (its last completion may still arrive).
    pub fn cancel(&mut self, key: u64) {
        self.push(opcode::AsyncCancel::new(key).build().user_data(CANCEL_KEY));
    }

    /// Watches file `fd` (an epoll instance) for readability with a multishot poll; its
    /// completions are [`Recv::Watched`] with `key`.
    pub fn watch(&mut self, fd: RawFd, key: u64) {
        self.push(
            opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(key),
        );
    }

    /// Submits what is queued and waits until at least one completion is ready or `timeout`
    /// passes (the receives of every socket with data run in this call). Errors: the system
    /// call's, except a timeout or an interruption.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        loop {
            let mut sq = self.ring.submission();
            while let Some(e) = self.backlog.first() {
                // SAFETY: as in `push`.
                if unsafe { sq.push(e) }.is_err() {
                    break;
                }
                self.backlog.remove(0);
            }
            drop(sq);
            if self.backlog.is_empty() {
                break;
            }
            self.ring.submit()?;
        }
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        let want = usize::from(self.ring.completion().is_empty());
        match self.ring.submitter().submit_with_args(want, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Runs the receives that are ready (at most 20 sockets' worth, see the module comment)
    /// without waiting. Errors: the system call's, except an interruption.
    pub fn run_ready(&mut self) -> io::Result<()> {
        // SAFETY: no submissions, no argument: io_uring_enter(fd, 0, 0, GETEVENTS, NULL, 0).
        match unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(0, 0, ENTER_GETEVENTS, None)
        } {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Hands every ready completion to `on` (its key, what it says, and whether more
    /// completions of that key follow); buffers go back to the ring after each call. Returns
    /// how many completions there were.
    pub fn reap(&mut self, mut on: impl FnMut(u64, Recv<'_>, bool)) -> usize {
        let mut gave = false;
        let mut seen = 0;
        loop {
            let Some(cqe) = self.ring.completion().next() else {
                break;
            };
            seen += 1;
            let key = cqe.user_data();
            let flags = cqe.flags();
            let more = cqueue::more(flags);
            let res = cqe.result();
            let bid = cqueue::buffer_select(flags);
            if key != CANCEL_KEY {
                let what = match (res, bid) {
                    (n, Some(b)) if n > 0 => Recv::Data(self.bufs.bytes(b, n as usize)),
                    (0, _) => Recv::Closed,
                    (n, _) if n == -libc::ENOBUFS => Recv::NoBuffers,
                    (n, _) if n < 0 => Recv::Error(-n),
                    _ => Recv::Watched,
                };
                on(key, what, more);
            }
            if let Some(b) = bid {
                self.bufs.give(b);
                gave = true;
            }
        }
        if gave {
            self.bufs.publish();
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    /// Collects every completion of `ring` for up to `tries` waits.
    fn collect(ring: &mut RecvRing, tries: usize) -> Vec<(u64, String, bool)> {
        let mut out = Vec::new();
        for _ in 0..tries {
            ring.wait(Duration::from_millis(50)).unwrap();
            ring.reap(|k, r, more| {
                let what = match r {
                    Recv::Data(d) => String::from_utf8_lossy(d).into_owned(),
                    other => format!("{other:?}"),
                };
                out.push((k, what, more));
            });
        }
        out
    }

    #[test]
    fn receives_every_write_of_every_socket_then_the_close() {
        let Ok(mut ring) = RecvRing::new(8, 64) else {
            eprintln!("io_uring unavailable here: skipped");
            return;
        };
        let (c1, mut s1) = pair();
        let (c2, mut s2) = pair();
        ring.arm(c1.as_raw_fd(), 1);
        ring.arm(c2.as_raw_fd(), 2);
        s1.write_all(b"one").unwrap();
        s2.write_all(b"two").unwrap();
        let got = collect(&mut ring, 3);
        assert!(got.contains(&(1, "one".into(), true)), "{got:?}");
        assert!(got.contains(&(2, "two".into(), true)), "{got:?}");
        drop(s1);
        let got = collect(&mut ring, 3);
        assert_eq!(got, vec![(1, "Closed".into(), false)]);
        // Buffers come back: many more receives than the ring holds.
        for k in 0..40 {
            s2.write_all(format!("m{k}").as_bytes()).unwrap();
            let got = collect(&mut ring, 2);
            let text: String = got.iter().map(|g| g.1.clone()).collect();
            assert_eq!(text, format!("m{k}"), "{got:?}");
        }
        ring.cancel(2);
        let got = collect(&mut ring, 2);
        assert!(got.iter().all(|g| g.0 == 2 && !g.2), "{got:?}");
    }

    #[test]
    fn an_empty_buffer_ring_ends_the_receive_and_a_new_arm_resumes() {
        let Ok(mut ring) = RecvRing::new(1, 4) else {
            eprintln!("io_uring unavailable here: skipped");
            return;
        };
        let (c, mut s) = pair();
        ring.arm(c.as_raw_fd(), 7);
        s.write_all(b"abcdefgh").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // One buffer of 4 bytes: the first receive takes it, the next finds none.
        let mut seen = Vec::new();
        ring.wait(Duration::from_millis(50)).unwrap();
        ring.reap(|k, r, more| seen.push((k, format!("{r:?}"), more)));
        assert!(
            seen.iter().any(|s| s.1.contains("NoBuffers") && !s.2),
            "{seen:?}"
        );
        ring.arm(c.as_raw_fd(), 7);
        let got = collect(&mut ring, 3);
        let text: String = got
            .iter()
            .filter(|g| !g.1.contains("NoBuffers"))
            .map(|g| g.1.clone())
            .collect();
        let first: String = seen
            .iter()
            .filter(|g| !g.1.contains("NoBuffers"))
            .map(|g| g.1.clone())
            .collect();
        assert_eq!(first + &text, "abcdefgh");
    }

    #[test]
    fn a_watched_epoll_instance_completes_when_it_has_events() {
        let Ok(mut ring) = RecvRing::new(2, 16) else {
            eprintln!("io_uring unavailable here: skipped");
            return;
        };
        let mut poll = mio::Poll::new().unwrap();
        let (c, mut s) = pair();
        c.set_nonblocking(true).unwrap();
        let mut mc = mio::net::TcpStream::from_std(c);
        poll.registry()
            .register(&mut mc, mio::Token(0), mio::Interest::READABLE)
            .unwrap();
        ring.watch(poll.as_raw_fd(), 9);
        assert!(collect(&mut ring, 1).is_empty());
        s.write_all(b"x").unwrap();
        let got = collect(&mut ring, 2);
        assert_eq!(got.first(), Some(&(9, "Watched".into(), true)));
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        assert_eq!(events.iter().count(), 1);
    }
}
