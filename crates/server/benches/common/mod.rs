//! Shared set-up for the fan-out benchmarks: a mount queue of a 64 kbit/s stream and listeners
//! that are each due one second of it, as at every tick of a shard.

use std::sync::Arc;

use bytes::Bytes;
use throng_server::bench_api::Cursor;
use throng_server::bench_api::IcyMeta;
use throng_server::bench_api::{QueueSnapshot, QueueWriter};

/// Bytes per second of a 64 kbit/s stream.
pub const BYTES_PER_SEC: u64 = 8000;

/// A queue holding `seconds` of a 64 kbit/s stream in 100 ms chunks (800 bytes each), as the
/// chunker makes them.
pub fn snapshot(seconds: u64) -> Arc<QueueSnapshot> {
    let mut w = QueueWriter::new(512_000);
    for i in 0..seconds * 10 {
        w.push(Bytes::from(vec![(i % 251) as u8; 800]), false, None);
    }
    let feed = w.queue();
    std::mem::forget(w); // keep the feed live (not ended)
    feed.load()
}

/// The ICY block in force.
pub fn icy() -> IcyMeta {
    IcyMeta {
        generation: 1,
        block: throng_proto::icy::metadata_block("Artist - Title", None),
    }
}

/// ICY interval of the benchmark's ICY listeners in bytes: two metadata points per second of a
/// 64 kbit/s stream, so the interleave path is exercised.
pub const METAINT: u32 = 4000;

/// `n` listeners each one second behind the head; every `icy_every`-th asks for ICY metadata
/// every [`METAINT`] bytes (0: none).
pub fn listeners(n: usize, snapshot: &QueueSnapshot, icy_every: usize) -> Vec<Cursor> {
    (0..n)
        .map(|i| {
            let metaint = (icy_every > 0 && i % icy_every == 0).then_some(METAINT);
            Cursor::new(snapshot.head - BYTES_PER_SEC, Bytes::new(), metaint)
        })
        .collect()
}
