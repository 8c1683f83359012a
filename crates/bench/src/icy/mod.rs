//! ICY listeners (`throng bench run URL`): the `mio` event loop that plays many Icecast
//! listeners ([`engine`]) and the per-listener accounting and starvation rule ([`listener`]).

pub mod engine;
pub mod listener;
