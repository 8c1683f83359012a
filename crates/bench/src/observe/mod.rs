//! Watching the server and the bench itself: per-second server samples from `/proc` or a
//! Prometheus URL ([`sampler`]), finding the server process ([`pidfind`]), the bench's own CPU
//! time ([`rusage`]) and what a report records about the run ([`meta`]).

pub mod meta;
pub mod pidfind;
pub mod rusage;
pub mod sampler;
