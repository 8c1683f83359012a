//! A mount's queue: a window of shared, immutable chunks (`bytes::Bytes`) published as snapshots.
//!
//! The writer (whatever feeds the mount: a source client, a relay, a file) appends chunks that
//! each start on a sync point (an MP3/ADTS frame or an Ogg page) and publishes a new immutable
//! [`QueueSnapshot`] through an `ArcSwap`. Readers (fan-out shards) load the current snapshot once per
//! tick, without any lock shared by all listeners. Offsets are absolute: byte 0 is the first byte
//! the mount ever produced, so a listener's position is one `u64`.
//!
//! Retention is `max(queue-size, burst-size)` bytes: a listener whose position falls behind the
//! oldest retained byte has lagged more than queue-size, as Icecast 2.4.4 `source.c` judges it.

use std::collections::VecDeque;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;

/// One piece of a mount's stream, starting on a sync point.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Absolute stream offset of the first byte, in bytes.
    pub start: u64,
    /// The bytes (one or more whole frames or pages).
    pub data: Bytes,
    /// Ogg only: the codec header pages in force for this chunk, replayed to a listener who
    /// starts here (Icecast 2.4.4 `format_ogg.c` `header_pages`).
    pub ogg_headers: Option<Arc<Bytes>>,
    /// Ogg only: this chunk *is* a new set of header pages (a chained stream starts here).
    pub is_header: bool,
}

impl Chunk {
    /// Offset just past the chunk's last byte.
    pub fn end(&self) -> u64 {
        self.start + self.data.len() as u64
    }
}

/// An immutable snapshot of a mount's queue.
#[derive(Debug, Default)]
pub struct QueueSnapshot {
    /// Chunks, oldest first, contiguous (`chunks[i].end() == chunks[i + 1].start`).
    pub chunks: Vec<Chunk>,
    /// Offset of the next byte the mount will produce.
    pub head: u64,
    /// Ogg only: the current header set, for listeners joining at the live edge.
    pub ogg_headers: Option<Arc<Bytes>>,
    /// The feed has ended: no more chunks will come.
    pub ended: bool,
}

impl QueueSnapshot {
    /// Offset of the oldest retained byte.
    pub fn tail(&self) -> u64 {
        self.chunks.first().map_or(self.head, |c| c.start)
    }

    /// Index of the chunk holding offset `pos`, or `None` if `pos` is outside `[tail, head)`.
    pub fn chunk_index(&self, pos: u64) -> Option<usize> {
        if pos < self.tail() || pos >= self.head {
            return None;
        }
        Some(self.chunks.partition_point(|c| c.end() <= pos))
    }

    /// Where a new listener starts and the header pages it needs first (Ogg), per the burst rule
    /// of [`throng_proto::burst::join_offset`].
    pub fn join_point(&self, burst: u64) -> (u64, Option<Arc<Bytes>>) {
        let pos =
            throng_proto::burst::join_offset(self.chunks.iter().map(|c| c.start), self.head, burst);
        let headers = match self.chunk_index(pos) {
            Some(i) if self.chunks[i].is_header => None,
            Some(i) => self.chunks[i].ogg_headers.clone(),
            None => self.ogg_headers.clone(),
        };
        (pos, headers)
    }
}

/// The published side of a mount's queue, read by fan-out shards.
#[derive(Debug, Default)]
pub struct Queue {
    snapshot: ArcSwap<QueueSnapshot>,
}

impl Queue {
    /// The current snapshot.
    pub fn load(&self) -> Arc<QueueSnapshot> {
        self.snapshot.load_full()
    }
}

/// The single writer of a [`Queue`]: appends chunks, trims to the retention size, publishes.
#[derive(Debug)]
pub struct QueueWriter {
    queue: Arc<Queue>,
    chunks: VecDeque<Chunk>,
    head: u64,
    retained: u64,
    retain: u64,
    ogg_headers: Option<Arc<Bytes>>,
}

impl QueueWriter {
    /// A writer retaining at least `retain` bytes (queue-size, or burst-size if larger).
    pub fn new(retain: u64) -> QueueWriter {
        QueueWriter {
            queue: Arc::new(Queue::default()),
            chunks: VecDeque::new(),
            head: 0,
            retained: 0,
            retain: retain.max(1),
            ogg_headers: None,
        }
    }

    /// A writer continuing a queue carried across a binary upgrade: `chunks` (contiguous,
    /// oldest first) end at `head`, `ogg_headers` is the current Ogg header set. Publishes them
    /// at once, so listeners keep their absolute positions.
    pub fn resume(
        retain: u64,
        chunks: Vec<Chunk>,
        head: u64,
        ogg_headers: Option<Arc<Bytes>>,
    ) -> QueueWriter {
        let retained = chunks.iter().map(|c| c.data.len() as u64).sum();
        let w = QueueWriter {
            queue: Arc::new(Queue::default()),
            chunks: chunks.into(),
            head,
            retained,
            retain: retain.max(1),
            ogg_headers,
        };
        w.publish(false);
        w
    }

    /// Bytes this writer retains (queue-size or burst-size, whichever is larger).
    pub fn retain(&self) -> u64 {
        self.retain
    }

    /// The feed this writer publishes to.
    pub fn queue(&self) -> Arc<Queue> {
        self.queue.clone()
    }

    /// Offset of the next byte to be appended.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Appends a chunk of whole frames/pages and publishes a new snapshot. `is_header` marks a
    /// new Ogg header set, which becomes the current one.
    pub fn push(&mut self, data: Bytes, is_header: bool, ogg_headers: Option<Arc<Bytes>>) {
        if data.is_empty() {
            return;
        }
        if is_header {
            self.ogg_headers = ogg_headers.clone();
        }
        let len = data.len() as u64;
        self.chunks.push_back(Chunk {
            start: self.head,
            data,
            ogg_headers,
            is_header,
        });
        self.head += len;
        self.retained += len;
        while let Some(front) = self.chunks.front() {
            let flen = front.data.len() as u64;
            if self.retained - flen < self.retain {
                break;
            }
            self.retained -= flen;
            self.chunks.pop_front();
        }
        self.publish(false);
    }

    /// Publishes a final snapshot marked ended; listeners are closed once they have sent it all.
    pub fn end(&mut self) {
        self.publish(true);
    }

    fn publish(&self, ended: bool) {
        self.queue.snapshot.store(Arc::new(QueueSnapshot {
            chunks: self.chunks.iter().cloned().collect(),
            head: self.head,
            ogg_headers: self.ogg_headers.clone(),
            ended,
        }));
    }
}

impl Drop for QueueWriter {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_to_retention_and_finds_chunks() {
        let mut w = QueueWriter::new(250);
        for i in 0..10u8 {
            w.push(Bytes::from(vec![i; 100]), false, None);
        }
        let r = w.queue().load();
        assert_eq!(r.head, 1000);
        assert_eq!(r.tail(), 700); // 300 bytes kept: dropping one more would leave 200 < 250
        assert_eq!(r.chunk_index(699), None);
        assert_eq!(r.chunk_index(700), Some(0));
        assert_eq!(r.chunk_index(950), Some(2));
        assert_eq!(r.chunk_index(1000), None);
        assert_eq!(r.join_point(150).0, 900);
        assert_eq!(r.join_point(0).0, 1000);
        assert!(!r.ended);
        drop(w);
        // the feed stays readable after the writer is gone, marked ended
    }

    #[test]
    fn ogg_headers_replayed_unless_starting_on_them() {
        let mut w = QueueWriter::new(10_000);
        let h1 = Arc::new(Bytes::from_static(b"HEAD1"));
        w.push(Bytes::from_static(b"HEAD1"), true, Some(h1.clone()));
        w.push(Bytes::from(vec![1; 100]), false, Some(h1.clone()));
        let feed = w.queue();
        let r = feed.load();
        // A burst covering everything starts on the header chunk itself: no replay.
        assert_eq!(r.join_point(10_000), (0, None));
        // A burst starting on the data chunk replays the headers.
        assert_eq!(r.join_point(100), (5, Some(h1.clone())));
        // At the live edge the current header set is replayed.
        assert_eq!(r.join_point(0), (105, Some(h1)));
        w.end();
        assert!(feed.load().ended);
    }
}
