//! A mount's current ICY metadata block, shared by its listeners' cursors.

use bytes::Bytes;

/// A mount's current ICY metadata block (length byte + padded payload), with a generation number
/// that changes on every update so each listener gets the block once per change, as Icecast
/// 2.4.4 `format_mp3.c` sends it.
#[derive(Debug, Clone)]
pub struct IcyMeta {
    /// Incremented on every metadata update.
    pub generation: u64,
    /// The encoded block ([`throng_proto::icy::metadata_block`]).
    pub block: Bytes,
}
