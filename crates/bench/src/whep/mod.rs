//! WebRTC (WHEP) viewers (`throng bench run --whep URL`): str0m clients that set up over WHEP
//! and track RTP packets ([`viewer`]), and mouth-to-ear latency: the stamped Opus packets
//! ([`latency`]) and the source and ICY listeners that measure it ([`probe`]).

pub mod latency;
pub mod probe;
pub mod viewer;
