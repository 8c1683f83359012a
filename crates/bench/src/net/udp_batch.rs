//! Reading a UDP socket's waiting datagrams with one `recvmmsg(2)` call instead of a
//! `recvfrom(2)` each plus the one that finds the queue empty: a WHEP viewer's socket gets a
//! datagram every 20 ms and, on an edge-triggered poll, had to be read until `EAGAIN`, two
//! system calls per datagram. `recvmmsg` with `MSG_DONTWAIT` returns what is queued (up to the
//! batch), so a short batch means the queue is empty: one call per wake-up.
//!
//! On loopback the WHEP bench goes further: one socket per driving thread, bound to a port
//! on every address ([`bind_shared`]), carries the datagrams of all its viewers, each viewer
//! its own loopback address (`IP_PKTINFO`, `ip(7)`: the destination address of each datagram
//! read names the viewer, and [`send_from`] sends from the viewer's address), so one
//! `recvmmsg` takes the datagrams of many viewers at once. Its datagrams carry their kernel
//! arrival time (`SO_TIMESTAMPNS`, `socket(7)`), so a viewer's gaps are judged by when the
//! datagrams reached the host, not by when a busy bench thread got round to reading them.
//! Those stamps are the kernel's wall clock; a process whose clock is shifted (libfaketime, as
//! the bench's multi-host tests shift an agent's) reads another one, so the offset between the
//! two is measured once per process ([`kernel_clock_offset_us`]) and every stamp is put on the
//! process's clock.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest datagram kept (longer ones are truncated, as by a `recvfrom` into this buffer).
pub const DATAGRAM_MAX: usize = 2048;

/// Buffers for up to `capacity` datagrams read by one call, kept from call to call: a read
/// allocates nothing.
pub struct RecvBatch {
    bufs: Vec<u8>,
    /// Per datagram of the last read: its length, source, (with `IP_PKTINFO` on) the local
    /// address it was sent to and (with `SO_TIMESTAMPNS` on) its kernel arrival time.
    got: Vec<(usize, SocketAddr, Option<Ipv4Addr>, Option<SystemTime>)>,
    capacity: usize,
    /// Per datagram slot: the source address, the control buffer, the I/O vector and the
    /// header the kernel fills (the last two point at the others and at `bufs`).
    addrs: Vec<libc::sockaddr_storage>,
    control: Vec<[u64; CONTROL_WORDS]>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `iovs` and `msgs` point into this batch's own heap buffers,
// which never move (their vectors are never resized); only `recv` uses them, with `&mut self`,
// and it points them again before each call. Nothing is shared between threads.
unsafe impl Send for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("capacity", &self.capacity)
            .field("got", &self.got)
            .finish()
    }
}

impl RecvBatch {
    /// Buffers for `capacity` datagrams (at least 1) of [`DATAGRAM_MAX`] bytes.
    pub fn new(capacity: usize) -> RecvBatch {
        let capacity = capacity.max(1);
        RecvBatch {
            bufs: vec![0; capacity * DATAGRAM_MAX],
            got: Vec::with_capacity(capacity),
            capacity,
            // SAFETY: zeroed sockaddr_storage values are valid (family AF_UNSPEC).
            addrs: vec![unsafe { std::mem::zeroed() }; capacity],
            control: vec![[0; CONTROL_WORDS]; capacity],
            iovs: (0..capacity)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            // SAFETY: an all-zero mmsghdr is valid (no name, no buffers, no control data).
            msgs: (0..capacity)
                .map(|_| unsafe { std::mem::zeroed() })
                .collect(),
        }
    }

    /// How many datagrams one read takes at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Reads the datagrams waiting on the UDP socket `fd` (up to [`Self::capacity`], without
    /// blocking); returns how many. Fewer than the capacity: the queue was empty after them.
    ///
    /// Errors: the socket's (`WouldBlock` when nothing was waiting).
    pub fn recv(&mut self, fd: RawFd) -> std::io::Result<usize> {
        self.got.clear();
        for (i, buf) in self.bufs.chunks_mut(DATAGRAM_MAX).enumerate() {
            let iov = &mut self.iovs[i];
            iov.iov_base = buf.as_mut_ptr() as *mut libc::c_void;
            iov.iov_len = buf.len();
            let hdr = &mut self.msgs[i].msg_hdr;
            hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = iov;
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.control[i].as_mut_ptr().cast();
            hdr.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>();
            hdr.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        // SAFETY: each header points at an address slot, a control buffer and (through its
        // I/O vector) a buffer of this batch, alive for this call, and `msgs.len()` headers
        // are given.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        for m in &self.msgs[..n as usize] {
            let len = (m.msg_len as usize).min(DATAGRAM_MAX);
            // SAFETY: the kernel wrote `msg_namelen` bytes of a socket address into the slot.
            let addr = unsafe {
                let storage = *(m.msg_hdr.msg_name as *const libc::sockaddr_storage);
                socket2::SockAddr::new(storage, m.msg_hdr.msg_namelen)
            };
            let source = addr
                .as_socket()
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            // SAFETY: the header's control buffer holds `msg_controllen` bytes the kernel wrote.
            let (dest, arrival) = unsafe { control_fields(&m.msg_hdr) };
            self.got.push((len, source, dest, arrival));
        }
        Ok(self.got.len())
    }

    /// Datagram `i` of the last read: its bytes and source. Panics past the count read.
    pub fn get(&self, i: usize) -> (&[u8], SocketAddr) {
        let (len, source, _, _) = self.got[i];
        let start = i * DATAGRAM_MAX;
        (&self.bufs[start..start + len], source)
    }

    /// The local address datagram `i` of the last read was sent to, on a socket with
    /// `IP_PKTINFO` on ([`bind_shared`]); `None` otherwise. Panics past the count read.
    pub fn dest(&self, i: usize) -> Option<Ipv4Addr> {
        self.got[i].2
    }

    /// When datagram `i` of the last read reached this host (the kernel's stamp, on this
    /// process's wall clock: see the module comment), on a socket with `SO_TIMESTAMPNS` on ([`bind_shared`]); `None` otherwise. Right after the
    /// first such socket of the host is made, the kernel may still stamp a datagram when it is
    /// read (it turns arrival stamps on in deferred work, `net_enable_timestamp`): never
    /// earlier than the truth. Panics past the count read.
    pub fn arrival(&self, i: usize) -> Option<SystemTime> {
        self.got[i].3.map(on_process_clock)
    }
}

/// Control buffer per datagram, in 8-byte words (room for an `IP_PKTINFO` and an
/// `SCM_TIMESTAMPNS` message, 32 bytes each on 64-bit Linux, with room to spare).
const CONTROL_WORDS: usize = 12;

/// The destination address of an `IP_PKTINFO` and the arrival time of an `SCM_TIMESTAMPNS`
/// control message of `hdr`, each if present.
///
/// Safety: `hdr`'s control pointer and length describe a buffer the kernel filled.
unsafe fn control_fields(hdr: &libc::msghdr) -> (Option<Ipv4Addr>, Option<SystemTime>) {
    let (mut dest, mut arrival) = (None, None);
    if hdr.msg_control.is_null() || hdr.msg_controllen == 0 {
        return (dest, arrival);
    }
    // SAFETY: the caller's promise: walking the control messages stays inside the buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                let info = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::in_pktinfo);
                dest = Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)));
            } else if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let t = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                arrival = Some(
                    UNIX_EPOCH + Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.max(0) as u32),
                );
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    (dest, arrival)
}

/// Kernel arrival stamp `t` on this process's wall clock (`SystemTime::now()`'s), by
/// [`kernel_clock_offset_us`].
fn on_process_clock(t: SystemTime) -> SystemTime {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    let o = *OFFSET.get_or_init(|| kernel_clock_offset_us().unwrap_or(0));
    if o >= 0 {
        t + Duration::from_micros(o as u64)
    } else {
        t.checked_sub(Duration::from_micros(o.unsigned_abs()))
            .unwrap_or(t)
    }
}

/// How far this process's wall clock (`SystemTime::now()`) is ahead of the kernel's, which
/// stamps arrivals (µs; 0 to a few µs unless something such as libfaketime shifts the
/// process's clock): five datagrams sent to a socket of this process over loopback, each
/// stamped by the kernel between two readings of the process's clock, the offset the middle
/// of the range every sample allows (a stamp made late, at the read, still falls inside it).
///
/// Errors: the loopback socket cannot be made, or no datagram came back within 1 s.
pub fn kernel_clock_offset_us() -> std::io::Result<i64> {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let tx = std::net::UdpSocket::bind("127.0.0.1:0")?;
    stamp_arrivals(std::os::fd::AsRawFd::as_raw_fd(&rx))?;
    rx.set_nonblocking(true)?;
    let to = rx.local_addr()?;
    let unix_us = |t: SystemTime| match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    };
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    let mut batch = RecvBatch::new(1);
    for _ in 0..5 {
        let before = unix_us(SystemTime::now());
        tx.send_to(b"clock", to)?;
        let waited = Instant::now();
        let t = loop {
            match batch.recv(std::os::fd::AsRawFd::as_raw_fd(&rx)) {
                Ok(1) => break batch.got[0].3,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if waited.elapsed() > Duration::from_secs(1) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no loopback datagram to time the kernel's clock",
                ));
            }
            std::thread::yield_now();
        };
        let after = unix_us(SystemTime::now());
        let Some(t) = t.map(unix_us) else {
            return Err(std::io::Error::other("no kernel arrival stamp"));
        };
        lo = lo.max(before - t);
        hi = hi.min(after - t);
    }
    // Samples that disagree (a clock stepped meanwhile): the last range's middle is as good.
    Ok(if lo <= hi { lo + (hi - lo) / 2 } else { hi })
}

/// Turns on kernel arrival stamps (`SO_TIMESTAMPNS`, `socket(7)`) for the datagrams of UDP
/// socket `fd`, as [`bind_shared`] does: [`RecvBatch::arrival`] then says when each reached the
/// host.
///
/// Errors: the kernel's.
pub fn stamp_arrivals(fd: RawFd) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: an int option value of the right size; an invalid fd is the kernel's error.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A non-blocking IPv4 UDP socket bound to an ephemeral port on every local address, with
/// `IP_PKTINFO` and `SO_TIMESTAMPNS` on and a `buffer`-byte receive buffer (capped by the kernel's `rmem_max`):
/// the shared socket of a thread's loopback viewers.
///
/// Errors: the socket cannot be made or bound.
pub fn bind_shared(buffer: usize) -> std::io::Result<std::net::UdpSocket> {
    let sock = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    let _ = sock.set_recv_buffer_size(buffer);
    let _ = sock.set_send_buffer_size(buffer);
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and an int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    stamp_arrivals(std::os::fd::AsRawFd::as_raw_fd(&sock))?;
    sock.bind(&SocketAddr::from(([0, 0, 0, 0], 0)).into())?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// Sends `data` to `to` from local address `from` on socket `fd` (bound to every address,
/// [`bind_shared`]), without blocking: the source address rides in an `IP_PKTINFO` control
/// message (`ipi_spec_dst`, `ip(7)`).
///
/// Errors: the kernel's (`WouldBlock` when the send buffer is full).
pub fn send_from(fd: RawFd, data: &[u8], from: Ipv4Addr, to: SocketAddrV4) -> std::io::Result<()> {
    let dest = socket2::SockAddr::from(to);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: an all-zero msghdr is valid; it points at `dest`, `iov` and `control`, which
    // outlive the call; the control message is written inside `control` (CMSG_SPACE of an
    // in_pktinfo is 32 bytes, the buffer 64).
    let r = unsafe {
        let mut hdr: libc::msghdr = std::mem::zeroed();
        hdr.msg_name = dest.as_ptr() as *mut libc::c_void;
        hdr.msg_namelen = dest.len();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = control.as_mut_ptr().cast();
        hdr.msg_controllen =
            libc::CMSG_SPACE(std::mem::size_of::<libc::in_pktinfo>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(&hdr);
        (*c).cmsg_level = libc::IPPROTO_IP;
        (*c).cmsg_type = libc::IP_PKTINFO;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::in_pktinfo>() as u32) as usize;
        let info = libc::in_pktinfo {
            ipi_ifindex: 0,
            ipi_spec_dst: libc::in_addr {
                s_addr: u32::from(from).to_be(),
            },
            ipi_addr: libc::in_addr { s_addr: 0 },
        };
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::in_pktinfo, info);
        libc::sendmsg(fd, &hdr, libc::MSG_DONTWAIT)
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn an_unshifted_process_reads_the_kernels_clock() {
        // The same clock: the offset is the measuring's own error, far under a millisecond
        // (20 ms allows a loaded machine's preemption between the two readings).
        let o = kernel_clock_offset_us().unwrap();
        assert!(o.abs() < 20_000, "{o} µs");
    }

    #[test]
    fn one_read_takes_what_is_queued_in_order_with_sources() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RecvBatch::new(4);
        assert_eq!(
            batch.recv(rx.as_raw_fd()).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock,
            "nothing queued"
        );
        let to = rx.local_addr().unwrap();
        a.send_to(b"first", to).unwrap();
        b.send_to(b"second", to).unwrap();
        a.send_to(b"third", to).unwrap();
        // Loopback delivery is synchronous, but give a slow box a moment.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            batch.recv(rx.as_raw_fd()).unwrap(),
            3,
            "short batch: drained"
        );
        assert_eq!(batch.get(0), (&b"first"[..], a.local_addr().unwrap()));
        assert_eq!(batch.get(1), (&b"second"[..], b.local_addr().unwrap()));
        assert_eq!(batch.get(2), (&b"third"[..], a.local_addr().unwrap()));
        // More than a batch: the first read is full, the next takes the rest.
        for i in 0..6u8 {
            a.send_to(&[i], to).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(batch.recv(rx.as_raw_fd()).unwrap(), 4);
        assert_eq!(batch.get(3).0, &[3u8][..]);
        assert_eq!(batch.recv(rx.as_raw_fd()).unwrap(), 2);
        assert_eq!(batch.get(1).0, &[5u8][..]);
        assert_eq!(batch.dest(0), None, "no IP_PKTINFO asked for");
    }

    #[test]
    fn a_shared_socket_tells_and_sends_from_each_local_address() {
        let shared = bind_shared(1 << 20).unwrap();
        let port = shared.local_addr().unwrap().port();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let viewers = [Ipv4Addr::new(127, 100, 0, 7), Ipv4Addr::new(127, 100, 1, 9)];
        // To each viewer address: the read names it.
        // The kernel turns receive timestamps on for the whole stack in deferred work after a
        // socket first asks (`net_enable_timestamp`); until then it stamps a datagram when it
        // is read. Let it happen, as it has long before a bench run's hold.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let before = SystemTime::now();
        for (i, ip) in viewers.iter().enumerate() {
            peer.send_to(&[i as u8], (*ip, port)).unwrap();
        }
        let sent = SystemTime::now();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut batch = RecvBatch::new(8);
        assert_eq!(batch.recv(shared.as_raw_fd()).unwrap(), 2);
        for (i, ip) in viewers.iter().enumerate() {
            assert_eq!(batch.get(i).0, &[i as u8][..]);
            assert_eq!(batch.dest(i), Some(*ip));
            // Stamped when it arrived, not when it was read 50 ms later (10 ms of slack for the
            // kernel's and the vDSO's clock readings, which need not agree to the µs).
            let at = batch.arrival(i).expect("kernel arrival time");
            let slack = std::time::Duration::from_millis(10);
            assert!(
                at + slack >= before && at <= sent + slack,
                "{at:?} outside the send ({before:?} to {sent:?})"
            );
        }
        // From each viewer address: the peer sees it as the source.
        let to = match peer.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        };
        let mut buf = [0u8; 16];
        for ip in viewers {
            send_from(shared.as_raw_fd(), b"hi", ip, to).unwrap();
            let (n, from) = peer.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"hi");
            assert_eq!(from, SocketAddr::from((ip, port)));
        }
    }
}
