//! Media verified for every listener, as it arrives (sans-IO, no copy of the stream): the ICY
//! body check ([`stream`], with the Ogg page walker [`ogg`]) that turns bytes into media time
//! and catches frames that do not chain, and the latency stamp format ([`stamp`]).

pub mod ogg;
pub mod stamp;
pub mod stream;
