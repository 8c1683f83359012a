//! A mount's queue read as a byte stream, for the decoder (`std::io::Read`, blocking): from
//! the newest chunk (a frame boundary) when it starts, on from there, back to the newest chunk
//! when it lagged out of the retained window, end of stream when the mount's feed ended or
//! the transcoder is told to stop. Where to read next is [`next_read`], pure.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::mount::queue::{Queue, QueueSnapshot};

/// How long a read waits before it looks at the queue again when nothing new is there (a
/// source sends a chunk every few tens of milliseconds).
pub const POLL: Duration = Duration::from_millis(5);

/// What a read does next, from the position read so far and the queue's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStep {
    /// Read from this absolute offset (the position, or where the reader (re)joins).
    From(u64),
    /// Nothing new yet: wait and look again.
    Wait,
    /// The feed ended and everything was read.
    End,
}

/// Where to read next: at `pos` while it is inside the retained window; at the start of the
/// newest chunk (a sync point) when there is no position yet or the position fell behind the
/// window (the decoder lagged: it skips to the live edge); wait at the head of a live feed; end
/// at the head of an ended one.
pub fn next_read(pos: Option<u64>, q: &QueueSnapshot) -> ReadStep {
    match pos {
        Some(p) if p >= q.tail() && p < q.head => ReadStep::From(p),
        Some(p) if p >= q.head && q.ended => ReadStep::End,
        Some(p) if p >= q.head => ReadStep::Wait,
        _ => match q.chunks.last() {
            Some(c) => ReadStep::From(c.start),
            None if q.ended => ReadStep::End,
            None => ReadStep::Wait,
        },
    }
}

/// A mount's queue as a blocking byte stream ([`next_read`] decides, [`POLL`] between looks).
#[derive(Debug)]
pub struct QueueReader {
    queue: Arc<Queue>,
    stop: Arc<AtomicBool>,
    pos: Option<u64>,
    /// Times the reader lagged out of the window and skipped to the live edge.
    pub skips: u64,
}

impl QueueReader {
    /// A reader of `queue` that ends (reads 0 bytes) once `stop` is set.
    pub fn new(queue: Arc<Queue>, stop: Arc<AtomicBool>) -> QueueReader {
        QueueReader {
            queue,
            stop,
            pos: None,
            skips: 0,
        }
    }
}

impl Read for QueueReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let q = self.queue.load();
            match next_read(self.pos, &q) {
                ReadStep::End => return Ok(0),
                ReadStep::Wait => std::thread::sleep(POLL),
                ReadStep::From(at) => {
                    if self.pos.is_some_and(|p| p != at) {
                        self.skips += 1;
                        tracing::info!(
                            "transcoder lagged behind its mount's queue: skipped to the live edge"
                        );
                    }
                    let Some(i) = q.chunk_index(at) else {
                        std::thread::sleep(POLL);
                        continue;
                    };
                    let c = &q.chunks[i];
                    let from = (at - c.start) as usize;
                    let n = buf.len().min(c.data.len() - from);
                    buf[..n].copy_from_slice(&c.data[from..from + n]);
                    self.pos = Some(at + n as u64);
                    return Ok(n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::queue::QueueWriter;
    use bytes::Bytes;

    #[test]
    fn the_reader_joins_at_the_newest_chunk_and_skips_ahead_when_it_lagged() {
        let mut w = QueueWriter::new(10);
        let q = w.queue();
        assert_eq!(next_read(None, &q.load()), ReadStep::Wait);
        w.push(Bytes::from_static(b"aaaa"), false, None);
        w.push(Bytes::from_static(b"bbbb"), false, None);
        let s = q.load();
        assert_eq!(next_read(None, &s), ReadStep::From(4), "the newest chunk");
        assert_eq!(next_read(Some(6), &s), ReadStep::From(6));
        assert_eq!(next_read(Some(8), &s), ReadStep::Wait, "at the head");
        w.push(Bytes::from_static(b"cccc"), false, None);
        w.push(Bytes::from_static(b"dddd"), false, None);
        // Retaining 10 bytes: "aaaa" is gone.
        assert_eq!(next_read(Some(2), &q.load()), ReadStep::From(12), "lagged");
        w.end();
        assert_eq!(next_read(Some(16), &q.load()), ReadStep::End);
        assert_eq!(next_read(Some(14), &q.load()), ReadStep::From(14));
        let empty = QueueWriter::new(10);
        let eq = empty.queue();
        drop(empty);
        assert_eq!(next_read(None, &eq.load()), ReadStep::End);
    }

    #[test]
    fn reads_follow_the_queue_and_end_with_it_or_when_stopped() {
        let mut w = QueueWriter::new(1 << 10);
        w.push(Bytes::from_static(b"hello"), false, None);
        let stop = Arc::new(AtomicBool::new(false));
        let mut r = QueueReader::new(w.queue(), stop.clone());
        let mut buf = [0u8; 3];
        assert_eq!(r.read(&mut buf).unwrap(), 3);
        assert_eq!(&buf, b"hel");
        let mut rest = [0u8; 16];
        assert_eq!(r.read(&mut rest).unwrap(), 2);
        w.push(Bytes::from_static(b"world"), false, None);
        w.end();
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"world");
        let mut w2 = QueueWriter::new(1 << 10);
        w2.push(Bytes::from_static(b"x"), false, None);
        let mut r2 = QueueReader::new(w2.queue(), stop.clone());
        assert_eq!(r2.read(&mut buf).unwrap(), 1);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(r2.read(&mut buf).unwrap(), 0, "stopped while waiting");
        assert_eq!(r.skips, 0);
    }
}
