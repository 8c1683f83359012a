//! Sockets and the front door, below any protocol: listen sockets and the open-file limit
//! (`listen.rs`), the `clients` count and its slots (`clients.rs`), trusted proxies and the
//! deny/allow files (`filters.rs`), the PROXY protocol header of a load balancer
//! (`proxy.rs`), the replay of already-read bytes to hyper (`rewind.rs`), a connection plain
//! or TLS (`conn.rs`), and TLS: certificates, SNI, the swappable acceptor (`tls.rs`).

/// How long a client that speaks first with something it has at once may take to start: a
/// load balancer's PROXY header (`proxy.rs`), the ClientHello of a TLS connection whose address
/// is over its cap of connections still reading their head (`clients.rs`). A connection still
/// silent after this long is a socket that sends nothing, not a client in a crowd.
pub const PROMPT: std::time::Duration = std::time::Duration::from_secs(3);

pub mod clients;
pub mod conn;
pub mod filters;
pub mod listen;
pub mod proxy;
pub mod rewind;
pub mod tls;
