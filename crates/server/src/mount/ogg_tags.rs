//! An Ogg mount's comment-update state ([`OggTagSlot`]), shared by the admin handler that asks
//! for new tags and the mount's feeder that applies them (`ogg_retag.rs`).

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use throng_proto::ogg_rechain::{ChainStatus, TagUpdate};

/// An Ogg mount's tag state, shared by the admin handler and the feeder.
#[derive(Debug, Default)]
pub struct OggTagSlot {
    /// Set when `state.request` holds an update the feeder has not taken yet.
    pub(crate) pending: AtomicBool,
    pub(crate) state: Mutex<SlotState>,
}

/// The mutable part of an [`OggTagSlot`].
#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// Whether the source's current chain takes updates.
    pub(crate) status: ChainStatus,
    /// An update the feeder has not taken yet.
    pub(crate) request: Option<TagUpdate>,
    /// The artist stat.
    pub(crate) artist: Option<String>,
}

impl OggTagSlot {
    /// The current artist (from the last update, or the source's ARTIST comment), for the
    /// `artist` stat.
    pub fn artist(&self) -> Option<String> {
        self.state.lock().artist.clone()
    }

    /// Whether the source's current chain takes updates.
    pub fn status(&self) -> ChainStatus {
        self.state.lock().status.clone()
    }

    /// The update waiting for the feeder, if any (one atomic load when there is none).
    pub(crate) fn take_request(&self) -> Option<TagUpdate> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.state.lock().request.take()
    }
}
