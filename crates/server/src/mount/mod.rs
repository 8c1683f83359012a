//! Layer 1: a mount's stream and the state that describes it, with no knowledge of who feeds
//! it or how listeners are served. `live.rs` (the [`live::Mount`]: settings, counters, title),
//! `registry.rs` (live mounts by name, fallback chains, on-demand mounts), `queue.rs` (the
//! queue of shared chunks and its published snapshots), `chunker.rs` (frames into chunks),
//! `feeder.rs` (source bytes into the queue: ICY stripping, framing, garbage detection),
//! `icy_meta.rs` (the current ICY block), `ogg_tags.rs` and `ogg_retag.rs` (Ogg comment
//! updates), `intro.rs` (the intro file cache), `stream_end.rs` (why a feed ended, whose doing
//! it was, and whether it is worth retrying), `title_history.rs` (the last titles played, for the
//! station page), `handover.rs` (a mount carried across a binary
//! upgrade) and `freeze.rs` (how its feeding task is asked to stop for it).

pub mod chunker;
pub mod feeder;
pub mod freeze;
pub mod handover;
pub mod icy_meta;
pub mod intro;
pub mod live;
pub mod ogg_retag;
pub mod ogg_tags;
pub mod queue;
pub mod registry;
pub mod stream_end;
pub mod title_history;
