//! The WHEP engine's outgoing datagrams gathered over a pass and sent with one `sendmmsg(2)`
//! per [`BATCH`] datagrams instead of one `sendto(2)` each: a media pass writes one SRTP
//! datagram per viewer every 20 ms, so at thousands of viewers the per-call cost of the system
//! call (entry, socket lookup, file reference) is a visible share of the engine's CPU. The
//! gathering ([`SendBatch::push`], [`SendBatch::datagrams`]) is pure; [`SendBatch::flush`] is
//! the one system call, on the engine's non-blocking socket.

use std::net::SocketAddr;
use std::os::fd::RawFd;

/// Datagrams sent per `sendmmsg(2)` call (and gathered before a flush is due).
pub const BATCH: usize = 64;

/// What one [`SendBatch::flush`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Datagrams the kernel took.
    pub sent: u64,
    /// Datagrams dropped: refused by the kernel (one each), or left over when the socket's
    /// send buffer was full (the rest of the batch; a live stream does not wait).
    pub dropped: u64,
    /// `sendmmsg` calls made.
    pub calls: u64,
}

/// Datagrams waiting to be sent: their bytes back to back in one buffer, and where each goes.
#[derive(Debug, Default)]
pub struct SendBatch {
    bytes: Vec<u8>,
    /// Per datagram: its start in `bytes`, its length, its destination.
    items: Vec<(usize, usize, SocketAddr)>,
}

impl SendBatch {
    /// Adds a datagram; returns `true` when the batch holds [`BATCH`] datagrams (flush it).
    pub fn push(&mut self, data: &[u8], to: SocketAddr) -> bool {
        self.items.push((self.bytes.len(), data.len(), to));
        self.bytes.extend_from_slice(data);
        self.items.len() >= BATCH
    }

    /// Adds a datagram written in place by `fill`, given `room` bytes to write into: it
    /// returns the datagram's length (at most `room`), or `None` to add nothing. Returns
    /// whether the batch now holds [`BATCH`] datagrams (flush it), or `None` when `fill` added
    /// nothing. (An SRTP packet is sealed straight into the batch, without a copy.)
    pub fn push_with(
        &mut self,
        room: usize,
        to: SocketAddr,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<bool> {
        let start = self.bytes.len();
        self.bytes.resize(start + room, 0);
        match fill(&mut self.bytes[start..]) {
            Some(n) if n <= room => {
                self.bytes.truncate(start + n);
                self.items.push((start, n, to));
                Some(self.items.len() >= BATCH)
            }
            _ => {
                self.bytes.truncate(start);
                None
            }
        }
    }

    /// Datagrams waiting.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no datagram is waiting.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The datagrams waiting, in the order pushed.
    #[cfg(test)]
    pub fn datagrams(&self) -> impl Iterator<Item = (&[u8], SocketAddr)> {
        self.items
            .iter()
            .map(|&(start, len, to)| (&self.bytes[start..start + len], to))
    }

    /// Forgets the datagrams waiting (keeps the buffers' capacity).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }

    /// Sends every datagram waiting on the UDP socket `fd` (non-blocking) with `sendmmsg(2)`
    /// and empties the batch. A datagram the kernel refuses is dropped and the rest still
    /// go; when the send buffer is full (`EAGAIN`) the rest of the batch is dropped.
    pub fn flush(&mut self, fd: RawFd) -> Flushed {
        let mut done = Flushed::default();
        if self.is_empty() {
            return done;
        }
        let addrs: Vec<socket2::SockAddr> = self
            .items
            .iter()
            .map(|&(_, _, to)| socket2::SockAddr::from(to))
            .collect();
        let mut iovs: Vec<libc::iovec> = self
            .items
            .iter()
            .map(|&(start, len, _)| libc::iovec {
                // sendmmsg only reads the buffers (the iovec type is shared with reads).
                iov_base: self.bytes[start..].as_ptr() as *mut libc::c_void,
                iov_len: len,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .zip(&addrs)
            .map(|(iov, addr)| {
                // SAFETY: an all-zero msghdr is valid (no control data, no flags).
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_name = addr.as_ptr() as *mut libc::c_void;
                hdr.msg_namelen = addr.len();
                hdr.msg_iov = iov;
                hdr.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: hdr,
                    msg_len: 0,
                }
            })
            .collect();
        let mut at = 0;
        while at < msgs.len() {
            let rest = &mut msgs[at..];
            // SAFETY: every header points at an address and a buffer alive until the end of
            // this function (`addrs`, `iovs`, `self.bytes`), and `rest.len()` headers follow.
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    rest.as_mut_ptr(),
                    rest.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            done.calls += 1;
            if n > 0 {
                done.sent += n as u64;
                at += n as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock => {
                    done.dropped += (msgs.len() - at) as u64;
                    break;
                }
                _ => {
                    tracing::trace!("WebRTC sendmmsg: {e}");
                    done.dropped += 1;
                    at += 1;
                }
            }
        }
        drop(msgs);
        drop(iovs);
        self.clear();
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_datagram_written_in_place_keeps_only_what_was_written() {
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let mut batch = SendBatch::default();
        assert!(!batch.push(b"one", a));
        let put = batch.push_with(10, a, |buf| {
            assert_eq!(buf.len(), 10);
            buf[..4].copy_from_slice(b"four");
            Some(4)
        });
        assert_eq!(put, Some(false));
        assert_eq!(batch.push_with(10, a, |_| None), None, "nothing added");
        assert_eq!(
            batch.push_with(2, a, |_| Some(3)),
            None,
            "longer than its room"
        );
        assert!(!batch.push(b"two", a));
        let got: Vec<Vec<u8>> = batch.datagrams().map(|(d, _)| d.to_vec()).collect();
        assert_eq!(
            got,
            vec![b"one".to_vec(), b"four".to_vec(), b"two".to_vec()]
        );
    }

    #[test]
    fn a_batch_keeps_datagrams_apart_and_says_when_it_is_full() {
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "[::1]:2000".parse().unwrap();
        let mut batch = SendBatch::default();
        assert!(batch.is_empty());
        assert!(!batch.push(b"one", a));
        assert!(!batch.push(b"", b));
        assert!(!batch.push(b"three", a));
        let got: Vec<(Vec<u8>, SocketAddr)> =
            batch.datagrams().map(|(d, to)| (d.to_vec(), to)).collect();
        assert_eq!(
            got,
            vec![
                (b"one".to_vec(), a),
                (Vec::new(), b),
                (b"three".to_vec(), a)
            ]
        );
        for _ in 3..BATCH - 1 {
            assert!(!batch.push(b"x", a));
        }
        assert!(batch.push(b"x", a), "the BATCH-th datagram fills it");
        assert_eq!(batch.len(), BATCH);
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.datagrams().count(), 0);
    }

    #[test]
    fn a_flush_sends_each_datagram_to_its_own_address_in_order() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.set_nonblocking(true).unwrap();
        let rx1 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        for r in [&rx1, &rx2] {
            r.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
        }
        let mut batch = SendBatch::default();
        // More than one sendmmsg call's worth.
        let n = BATCH + 10;
        for i in 0..n {
            let to = if i % 2 == 0 { &rx1 } else { &rx2 };
            batch.push(format!("d{i}").as_bytes(), to.local_addr().unwrap());
        }
        let done = batch.flush(tx.as_raw_fd());
        assert_eq!(done.sent, n as u64);
        assert_eq!(done.dropped, 0);
        assert!(done.calls >= 1);
        assert!(batch.is_empty());
        let mut buf = [0u8; 64];
        for i in 0..n {
            let r = if i % 2 == 0 { &rx1 } else { &rx2 };
            let (len, from) = r.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..len], format!("d{i}").as_bytes());
            assert_eq!(from, tx.local_addr().unwrap());
        }
        // An empty flush makes no call.
        assert_eq!(batch.flush(tx.as_raw_fd()), Flushed::default());
    }
}
