//! The audience core: what every member of a mount's audience has in common, whichever path
//! serves it (ICY listeners on the fan-out shards, HLS sessions, WHEP viewers, event
//! subscribers). Below the engines (layer L1), so each engine uses the same record, the same
//! end reasons and the same following rules:
//!
//! - [`record`]: [`ListenerInfo`] (the request facts kept for a session), [`ListenerRow`] (how
//!   the admin lists show it), [`CloseHook`] (URL auth `listener_remove`), [`AudiencePath`].
//! - [`end`]: [`EndReason`], one vocabulary of whose side ended a session and why, shared by
//!   the access log, `/metrics`, the status documents and the admin UI.
//! - [`follow`]: the pure follower, deciding where a member joins a mount's queue, what it is
//!   due next, what lag, an ended feed, a fallback or a move does to it, with `now` passed in.

pub mod end;
pub mod follow;
pub mod page;
pub mod record;

pub use end::EndReason;
pub use record::{AudiencePath, CloseHook, ClosedListener, ListenerInfo, ListenerRow};
