//! Sockets and the front door, below any protocol: listen sockets and the open-file limit
//! (`listen.rs`), the `clients` count and its slots (`clients.rs`), trusted proxies and the
//! deny/allow files (`filters.rs`), the PROXY protocol header of a load balancer
//! (`proxy.rs`), the replay of already-read bytes to hyper (`rewind.rs`), a connection plain
//! or TLS (`conn.rs`), and TLS: certificates, SNI, the swappable acceptor (`tls.rs`).

pub mod clients;
pub mod conn;
pub mod filters;
pub mod listen;
pub mod proxy;
pub mod rewind;
pub mod tls;
