//! The hand-over channel of a binary upgrade: a Unix stream socket between the old and the new
//! process, carrying [`Message`]s (postcard-encoded) with file descriptors attached as
//! `SCM_RIGHTS` ancillary data (at most [`MAX_FDS`] per message, the kernel's `SCM_MAX_FD`).
//!
//! Framing: an 8-byte header (payload length, descriptor count; little-endian `u32`s) sent with
//! the descriptors in one `sendmsg`, then the payload. The receiver takes the header with one
//! `recvmsg` (the descriptors arrive with its first byte) and reads the payload after it.
//! Blocking I/O: both sides run it off the async runtime.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::fanout::handover::ListenerState;
use crate::fanout::seal::SealExport;
use crate::mount::handover::MountState;

/// Most descriptors in one message (Linux `SCM_MAX_FD` is 253).
pub const MAX_FDS: usize = 250;

/// Largest payload accepted, in bytes (a mount's queue is at most a few MiB).
pub const MAX_PAYLOAD: usize = 256 << 20;

/// Environment variable naming the descriptor of the hand-over socket in the new process.
pub const UPGRADE_FD_ENV: &str = "THRONG_UPGRADE_FD";

/// What went wrong on the hand-over channel.
#[derive(Debug, Error)]
pub enum WireError {
    /// Reading or writing the socket failed.
    #[error("hand-over socket: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the channel (the other process exited).
    #[error("the other process closed the hand-over socket")]
    Closed,
    /// A message could not be encoded or decoded (the two binaries disagree on the format).
    #[error("hand-over message: {0}")]
    Codec(#[from] postcard::Error),
    /// A header announced more than the limits allow, or descriptors went missing.
    #[error("malformed hand-over message: {0}")]
    Malformed(String),
}

/// One message of the hand-over, in the order they are sent.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    /// New → old: the new binary started and loaded its configuration.
    Hello {
        /// Its process id.
        pid: u32,
        /// Its version (`CARGO_PKG_VERSION`).
        version: String,
    },
    /// Old → new: the listen sockets (descriptors attached, in this order), and the server's
    /// start time (status `server_start` carries over).
    ListenSockets {
        /// Per socket: its address and what it speaks ([`crate::net::listen::Port::to_wire`]).
        sockets: Vec<(SocketAddr, u8)>,
        /// When the first process of this server started.
        started: chrono::DateTime<chrono::Local>,
        /// Server-wide counters that carry over: source client connections (status
        /// `source_client_connections`) and refused connections.
        counters: (u64, u64),
    },
    /// New → old: the server is built around the listen sockets; the old process may stop
    /// accepting and hand everything else over.
    Ready,
    /// Old → new: one mount; a source client's socket is attached.
    Mount(Box<MountState>),
    /// Old → new: all mounts are sent; listeners follow.
    MountsDone,
    /// Old → new: listeners, their sockets attached in the same order.
    Listeners(Vec<ListenerState>),
    /// Old → new: everything is sent.
    End,
    /// New → old: everything is installed; the old process may exit.
    TookOver {
        /// Mounts adopted.
        mounts: usize,
        /// Listeners adopted.
        listeners: usize,
    },
    /// Old → new: listeners over TLS with their sealing state, sockets attached in the same
    /// order (last variant: an older binary never sends it).
    TlsListeners(Vec<(ListenerState, SealExport)>),
}

/// Sends `msg` with `fds` attached.
///
/// Errors: [`WireError`].
pub fn send(sock: &mut UnixStream, msg: &Message, fds: &[RawFd]) -> Result<(), WireError> {
    if fds.len() > MAX_FDS {
        return Err(WireError::Malformed(format!("{} descriptors", fds.len())));
    }
    let payload = postcard::to_stdvec(msg)?;
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&(fds.len() as u32).to_le_bytes());
    let iov = [IoSlice::new(&header)];
    let cmsgs: Vec<ControlMessage> = if fds.is_empty() {
        Vec::new()
    } else {
        vec![ControlMessage::ScmRights(fds)]
    };
    let mut sent = loop {
        match sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), None) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(WireError::Io(e.into())),
        }
    };
    while sent < header.len() {
        sent += sock.write(&header[sent..])?;
    }
    sock.write_all(&payload)?;
    Ok(())
}

/// Receives one message and the descriptors attached to it (close-on-exec set).
///
/// Errors: [`WireError`]; [`WireError::Closed`] at end of stream.
pub fn recv(sock: &mut UnixStream) -> Result<(Message, Vec<OwnedFd>), WireError> {
    let mut header = [0u8; 8];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let (got, mut fds) = loop {
        let mut iov = [IoSliceMut::new(&mut header)];
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => {
                let mut fds = Vec::new();
                for c in m.cmsgs().map_err(|e| WireError::Io(e.into()))? {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        // SAFETY: the kernel just installed these descriptors in this process
                        // for this message; nothing else owns them.
                        fds.extend(raw.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
                    }
                }
                if m.flags.contains(MsgFlags::MSG_CTRUNC) {
                    return Err(WireError::Malformed("descriptors truncated".into()));
                }
                break (m.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(WireError::Io(e.into())),
        }
    };
    if got == 0 {
        return Err(WireError::Closed);
    }
    if got < header.len() {
        sock.read_exact(&mut header[got..])?;
    }
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let count = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
    if len > MAX_PAYLOAD || count != fds.len() {
        fds.clear();
        return Err(WireError::Malformed(format!(
            "{len} bytes, {count} descriptors announced"
        )));
    }
    let mut payload = vec![0u8; len];
    sock.read_exact(&mut payload)?;
    Ok((postcard::from_bytes(&payload)?, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_descriptors() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        send(
            &mut a,
            &Message::ListenSockets {
                sockets: vec![(addr, 0)],
                started: chrono::Local::now(),
                counters: (0, 0),
            },
            &[l.as_raw_fd()],
        )
        .unwrap();
        send(&mut a, &Message::End, &[]).unwrap();
        let (m, fds) = recv(&mut b).unwrap();
        assert!(matches!(m, Message::ListenSockets { ref sockets, .. } if sockets[0].0 == addr));
        assert_eq!(fds.len(), 1);
        let got = std::net::TcpListener::from(fds.into_iter().next().unwrap());
        assert_eq!(got.local_addr().unwrap(), addr);
        assert!(matches!(recv(&mut b).unwrap(), (Message::End, f) if f.is_empty()));
        drop(a);
        assert!(matches!(recv(&mut b), Err(WireError::Closed)));
    }
}
