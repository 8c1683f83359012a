//! Groups frames or pages into chunks for a mount's queue, whatever feeds the mount.
//!
//! A chunk always starts on a frame or page boundary, so a listener can join at any chunk.
//! Chunks are closed after [`CHUNK_MEDIA_US`] of audio (or [`CHUNK_MAX_BYTES`] when durations
//! are unknown), or when the caller flushes. Ogg header pages are collected into a header set
//! that is published as its own chunk (for listeners already playing a chained stream) and
//! attached to every following chunk (for listeners who join later).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use throng_proto::framer::{Unit, UnitKind};

use crate::mount::queue::QueueWriter;

/// Audio per chunk, in microseconds.
pub const CHUNK_MEDIA_US: u64 = 100_000;

/// Largest chunk when unit durations are unknown, in bytes.
pub const CHUNK_MAX_BYTES: usize = 8 * 1024;

/// Bytes allocated at once for the chunks to come (64 KiB): consecutive chunks share one
/// buffer and its reference count, so publishing a queue snapshot, which clones every retained
/// chunk, touches a few counts per mount instead of one cold cache line per chunk (at
/// 64 kbit/s, 640 chunks of 100 ms in a 512 kB queue, ten snapshots a second). A buffer is
/// freed when its last chunk leaves the queue: at most this much more memory per mount.
pub const BUFFER_BYTES: usize = 64 * 1024;

/// Feeds a mount's [`QueueWriter`] with units from a framer.
#[derive(Debug)]
pub struct Chunker {
    writer: QueueWriter,
    pending: BytesMut,
    pending_us: u64,
    headers: Option<Arc<Bytes>>,
    collecting_headers: Option<BytesMut>,
}

impl Chunker {
    /// A chunker writing to `writer`.
    pub fn new(writer: QueueWriter) -> Chunker {
        Chunker {
            writer,
            pending: BytesMut::new(),
            pending_us: 0,
            headers: None,
            collecting_headers: None,
        }
    }

    /// Continues an Ogg stream whose current header set is `headers` (already in the queue,
    /// e.g. after a binary upgrade): following pages are tagged with it, as if this chunker had
    /// collected it.
    pub fn continue_after(&mut self, headers: Arc<Bytes>) {
        self.headers = Some(headers);
    }

    /// Adds one unit; may publish a chunk.
    pub fn push(&mut self, unit: &Unit) {
        match unit.kind {
            UnitKind::OggHeader { new_chain } => {
                if new_chain || self.collecting_headers.is_none() {
                    self.flush();
                    self.collecting_headers = Some(BytesMut::new());
                }
                if let Some(h) = &mut self.collecting_headers {
                    h.extend_from_slice(&unit.data);
                }
            }
            UnitKind::OggPage | UnitKind::Audio => {
                self.finish_headers();
                if self.pending.capacity() - self.pending.len() < unit.data.len() {
                    self.pending.reserve(BUFFER_BYTES.max(unit.data.len()));
                }
                self.pending.extend_from_slice(&unit.data);
                self.pending_us += unit.duration_us;
                if self.pending_us >= CHUNK_MEDIA_US || self.pending.len() >= CHUNK_MAX_BYTES {
                    self.flush();
                }
            }
        }
    }

    /// Publishes the header set collected so far, if any.
    fn finish_headers(&mut self) {
        if let Some(h) = self.collecting_headers.take() {
            let h = h.freeze();
            let set = Arc::new(h.clone());
            self.headers = Some(set.clone());
            self.writer.push(h, true, Some(set));
        }
    }

    /// Publishes whatever is pending as a chunk.
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            let data = self.pending.split().freeze();
            self.writer.push(data, false, self.headers.clone());
            self.pending_us = 0;
        }
    }

    /// Offset of the next byte the mount will publish.
    pub fn head(&self) -> u64 {
        self.writer.head()
    }
}

impl Drop for Chunker {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(kind: UnitKind, data: &'static [u8], duration_us: u64) -> Unit {
        Unit {
            data: Bytes::from_static(data),
            duration_us,
            kind,
        }
    }

    #[test]
    fn audio_grouped_by_duration() {
        let w = QueueWriter::new(1 << 20);
        let feed = w.queue();
        let mut c = Chunker::new(w);
        for _ in 0..10 {
            c.push(&unit(UnitKind::Audio, b"0123456789", 26_000));
        }
        let r = feed.load();
        // 4 frames of 26 ms pass 100 ms: two chunks of 40 bytes, 20 bytes still pending.
        assert_eq!(r.chunks.len(), 2);
        assert_eq!(r.chunks[1].start, 40);
        drop(c);
        assert_eq!(feed.load().head, 100);
    }

    #[test]
    fn consecutive_chunks_share_one_buffer() {
        let w = QueueWriter::new(1 << 20);
        let feed = w.queue();
        let mut c = Chunker::new(w);
        for _ in 0..40 {
            c.push(&unit(UnitKind::Audio, b"0123456789", 50_000));
        }
        let r = feed.load();
        assert_eq!(r.chunks.len(), 20);
        // Each chunk follows the previous one in memory: one allocation (and one reference
        // count) for all of them, not one each.
        for pair in r.chunks.windows(2) {
            let end = pair[0].data.as_ptr() as usize + pair[0].data.len();
            assert_eq!(pair[1].data.as_ptr() as usize, end);
        }
    }

    #[test]
    fn ogg_header_sets_become_their_own_chunks() {
        let w = QueueWriter::new(1 << 20);
        let feed = w.queue();
        let mut c = Chunker::new(w);
        c.push(&unit(UnitKind::OggHeader { new_chain: true }, b"H1", 0));
        c.push(&unit(UnitKind::OggHeader { new_chain: false }, b"H2", 0));
        c.push(&unit(UnitKind::OggPage, b"p", 200_000));
        c.push(&unit(UnitKind::OggHeader { new_chain: true }, b"K1", 0));
        c.push(&unit(UnitKind::OggPage, b"q", 200_000));
        let r = feed.load();
        type Shape<'a> = (&'a [u8], bool, Option<&'a [u8]>);
        let shape: Vec<Shape> = r
            .chunks
            .iter()
            .map(|ch| {
                (
                    &ch.data[..],
                    ch.is_header,
                    ch.ogg_headers.as_deref().map(|b| &b[..]),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (&b"H1H2"[..], true, Some(&b"H1H2"[..])),
                (&b"p"[..], false, Some(&b"H1H2"[..])),
                (&b"K1"[..], true, Some(&b"K1"[..])),
                (&b"q"[..], false, Some(&b"K1"[..])),
            ]
        );
    }
}
