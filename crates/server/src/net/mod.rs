//! Sockets and the front door, below any protocol: listen sockets and the open-file limit
//! (`listen.rs`), the `clients` count and its slots (`clients.rs`), trusted proxies and the
//! deny/allow files (`filters.rs`), the PROXY protocol header of a load balancer
//! (`proxy.rs`), and the replay of already-read bytes to hyper
//! (`rewind.rs`).

pub mod clients;
pub mod filters;
pub mod listen;
pub mod proxy;
pub mod rewind;
