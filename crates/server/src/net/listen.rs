//! Listen sockets: binding with a large backlog (dual-stack on `[::]`), the HTTP + SHOUTcast
//! port pair, and the process's open-file limit that sizes the `clients` limit (raised from
//! the soft to the hard limit at start, [`raise_open_file_limit`]).

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// Listen backlog of every listen socket (the kernel caps it at `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// Binds a listen socket on `addr` (backlog [`LISTEN_BACKLOG`], dual-stack on `[::]`).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    bind_io(addr).map_err(|source| BindError { addr, source })
}

/// A listen address that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}")]
pub struct BindError {
    /// The address.
    pub addr: SocketAddr,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

fn bind_io(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // Dual-stack on `[::]`, as Icecast 2.4 sets IPV6_V6ONLY=0.
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

/// The process's open-file limit (RLIMIT_NOFILE soft limit).
pub fn open_file_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        1024
    }
}

/// Raises the soft open-file limit (RLIMIT_NOFILE) to the hard limit, as a server holding one
/// descriptor per client needs (the usual soft limit, 1024, would cap `clients` near 960).
/// Returns the limit before and after (equal when it already was the hard limit).
///
/// Errors: the I/O error of `getrlimit`/`setrlimit`.
pub fn raise_open_file_limit() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = r.rlim_cur;
    if r.rlim_cur >= r.rlim_max {
        return Ok((before, before));
    }
    r.rlim_cur = r.rlim_max;
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((before, open_file_limit()))
}

/// Most attempts at finding two free consecutive ports when the first listen port is 0.
pub const PORT_PAIR_ATTEMPTS: usize = 64;

/// Binds the HTTP listen socket `addr` and the SHOUTcast socket on the next port (as Icecast
/// 2.4.4 opens port + 1 for `<shoutcast-mount>`). With port 0, ephemeral ports are tried until
/// the one after is free too (at most [`PORT_PAIR_ATTEMPTS`] times).
///
/// Errors: [`BindError`] naming the address that could not be bound.
pub fn bind_pair(addr: SocketAddr) -> Result<(TcpListener, TcpListener), BindError> {
    let next = |a: SocketAddr| -> Result<SocketAddr, BindError> {
        let port = a.port().checked_add(1).ok_or_else(|| BindError {
            addr: a,
            source: std::io::Error::other("no port after 65535 for SHOUTcast sources"),
        })?;
        Ok(SocketAddr::new(a.ip(), port))
    };
    if addr.port() != 0 {
        let http = bind(addr)?;
        return Ok((http, bind(next(addr)?)?));
    }
    let mut last = None;
    for _ in 0..PORT_PAIR_ATTEMPTS {
        let http = bind(addr)?;
        let bound = http
            .local_addr()
            .map_err(|source| BindError { addr, source })?;
        match next(bound).and_then(bind) {
            Ok(sc) => return Ok((http, sc)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| BindError {
        addr,
        source: std::io::Error::other("no free port pair"),
    }))
}

/// What a listen socket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// HTTP: sources, listeners, admin.
    Http,
    /// SHOUTcast v1 source logins (`shoutcast.rs`).
    Shoutcast,
    /// HTTPS: TLS, then HTTP as on [`Port::Http`] (`[tls] listen`).
    Tls,
    /// HTTPS or HTTP, by the first byte of each connection (`[tls] auto`).
    Auto,
}

impl Port {
    /// The byte a binary upgrade sends for this port (0 and 1 were the `false`/`true` of
    /// "is SHOUTcast" before TLS: the encoding is the same).
    pub fn to_wire(self) -> u8 {
        match self {
            Port::Http => 0,
            Port::Shoutcast => 1,
            Port::Tls => 2,
            Port::Auto => 3,
        }
    }

    /// The port a binary upgrade's byte names (unknown bytes: HTTP).
    pub fn from_wire(b: u8) -> Port {
        match b {
            1 => Port::Shoutcast,
            2 => Port::Tls,
            3 => Port::Auto,
            _ => Port::Http,
        }
    }
}

/// A listen socket the run loop keeps: a descriptor of its own (the accept task holds another),
/// so accepting can stop and restart, and a binary upgrade can hand it over.
#[derive(Debug)]
pub struct ListenSocket {
    /// The socket.
    pub fd: std::os::fd::OwnedFd,
    /// Its bound address.
    pub addr: SocketAddr,
    /// What it speaks.
    pub port: Port,
}

impl ListenSocket {
    /// Keeps `l` (a descriptor of its own) with what it speaks.
    ///
    /// Errors: the socket's address or descriptor cannot be read.
    pub fn new(l: TcpListener, port: Port) -> std::io::Result<ListenSocket> {
        let addr = l.local_addr()?;
        let std = l.into_std()?;
        Ok(ListenSocket {
            fd: std.into(),
            addr,
            port,
        })
    }

    /// A new listener on the socket, for an accept task.
    ///
    /// Errors: the descriptor cannot be duplicated.
    pub fn listener(&self) -> std::io::Result<TcpListener> {
        let std = std::net::TcpListener::from(self.fd.try_clone()?);
        std.set_nonblocking(true)?;
        TcpListener::from_std(std)
    }
}
