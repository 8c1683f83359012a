//! The network plumbing every mode shares: URL parsing ([`url`]), non-blocking client sockets
//! bound over a source-address range ([`connect`]), the TLS client of `https://` listeners
//! ([`tls`]) and batched UDP reads for WebRTC viewers ([`udp_batch`]).

pub mod connect;
pub mod tls;
pub mod udp_batch;
pub mod url;
