//! The network plumbing every mode shares: URL parsing ([`url`]), non-blocking client sockets
//! bound over a source-address range ([`connect`]), the TLS client of `https://` listeners
//! ([`tls`]), batched UDP reads for WebRTC viewers ([`udp_batch`]) and the io_uring receive
//! path of streaming ICY listeners ([`recv_ring`]).

pub mod connect;
pub mod recv_ring;
pub mod tls;
pub mod udp_batch;
pub mod url;
