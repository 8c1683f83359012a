//! The Opus packets of each feed (a mount's Ogg/Opus queue, or an MP3 or AAC mount's
//! transcoded one), depacketized once per engine for all its viewers of that feed (issue 25,
//! "cheaper viewers"): each queue chunk's pages are reassembled into packets
//! ([`OggOpusReader`]) the first time a viewer reads them, kept while the queue retains the
//! chunk, and every viewer then stamps the same shared packets with its own RTP clock
//! (`throng_proto::opus_rtp::RtpClock`). A viewer's reading position is always a chunk
//! boundary (it reads whole chunks, and joins at the live edge), so it visits whole cached
//! chunks.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use throng_proto::ogg;
use throng_proto::opus_rtp::{OggOpusReader, PagePackets};

use crate::mount::queue::{Queue, QueueSnapshot};

/// One chunk of a feed, depacketized.
#[derive(Debug)]
struct Chunk {
    start: u64,
    end: u64,
    pages: Vec<PagePackets>,
}

/// One feed's depacketized chunks.
#[derive(Debug)]
struct Feed {
    /// Held so the key (its address) is not reused while cached.
    _queue: Arc<Queue>,
    reader: OggOpusReader,
    chunks: VecDeque<Chunk>,
    /// Queue offset read up to.
    next: u64,
    /// Read since the last sweep.
    used: bool,
}

/// The depacketized feeds of one engine, by queue.
#[derive(Debug, Default)]
pub struct FeedPages {
    feeds: HashMap<usize, Feed>,
}

impl FeedPages {
    /// Visits, in order, the audio pages of `queue` (whose snapshot is `q`) from offset `from`
    /// to its head, depacketizing the chunks no viewer read before. A chunk that `from` falls
    /// inside of (never the case for a viewer, which reads whole chunks) is skipped. Returns
    /// the offset read up to (`q.head`, or `from` when that is past it).
    pub fn read(
        &mut self,
        queue: &Arc<Queue>,
        q: &QueueSnapshot,
        from: u64,
        mut visit: impl FnMut(&PagePackets),
    ) -> u64 {
        let feed = self
            .feeds
            .entry(Arc::as_ptr(queue) as usize)
            .or_insert_with(|| Feed {
                _queue: queue.clone(),
                reader: OggOpusReader::default(),
                chunks: VecDeque::new(),
                next: from,
                used: true,
            });
        feed.used = true;
        if feed.next < q.tail() || feed.next > q.head {
            // The feed fell out of the window (or is a new queue at that address): start over.
            feed.chunks.clear();
            feed.reader = OggOpusReader::default();
            feed.next = from.max(q.tail());
        }
        if let Some(i) = q.chunk_index(feed.next) {
            for c in &q.chunks[i..] {
                if c.start < feed.next {
                    continue;
                }
                let mut pages = Vec::new();
                let mut data = &c.data[..];
                while !data.is_empty() {
                    // Queue chunks hold whole pages that passed their CRC check at ingest.
                    match ogg::parse_trusted_page(data) {
                        ogg::PageParse::Page(page) => {
                            data = &data[page.bytes.len()..];
                            pages.extend(feed.reader.push_page(&page));
                        }
                        _ => break,
                    }
                }
                feed.chunks.push_back(Chunk {
                    start: c.start,
                    end: c.end(),
                    pages,
                });
                feed.next = c.end();
            }
        }
        while feed.chunks.front().is_some_and(|c| c.end <= q.tail()) {
            feed.chunks.pop_front();
        }
        for c in feed.chunks.iter().filter(|c| c.start >= from) {
            c.pages.iter().for_each(&mut visit);
        }
        q.head.max(from)
    }

    /// Forgets the feeds no viewer read since the last sweep (call it now and then, e.g. at
    /// each health pass).
    pub fn sweep(&mut self) {
        self.feeds.retain(|_, f| std::mem::take(&mut f.used));
    }

    /// Feeds cached now.
    pub fn len(&self) -> usize {
        self.feeds.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::queue::QueueWriter;
    use bytes::Bytes;
    use throng_proto::ogg::build_page;
    use throng_proto::opus_rtp::RtpClock;

    /// A 20 ms CELT packet filled with `fill`.
    fn pkt(fill: u8) -> Vec<u8> {
        let mut p = vec![fill; 40];
        p[0] = 31 << 3;
        p
    }

    fn page(seq: u32, granule: u64, fill: u8) -> Bytes {
        Bytes::from(build_page(0, granule, 9, seq, &pkt(fill)).unwrap())
    }

    #[test]
    fn every_viewer_gets_the_same_packets_depacketized_once() {
        let mut w = QueueWriter::new(200);
        let queue = w.queue();
        let mut cache = FeedPages::default();
        // Two viewers at the live edge before any audio.
        let head = queue.load().head;
        let (mut a, mut b) = (RtpClock::new(1000), RtpClock::new(50_000));
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        let mut pos_a = cache.read(&queue, &queue.load(), head, |p| a.stamp(p, &mut out_a));
        let mut pos_b = cache.read(&queue, &queue.load(), head, |p| b.stamp(p, &mut out_b));
        assert!(out_a.is_empty() && out_b.is_empty());
        w.push(page(0, 960, 1), false, None);
        w.push(page(1, 1920, 2), false, None);
        pos_a = cache.read(&queue, &queue.load(), pos_a, |p| a.stamp(p, &mut out_a));
        w.push(page(2, 2880, 3), false, None);
        pos_b = cache.read(&queue, &queue.load(), pos_b, |p| b.stamp(p, &mut out_b));
        pos_a = cache.read(&queue, &queue.load(), pos_a, |p| a.stamp(p, &mut out_a));
        assert_eq!(pos_a, pos_b);
        assert_eq!(out_a.len(), 3);
        assert_eq!(out_b.len(), 3);
        for (x, y) in out_a.iter().zip(&out_b) {
            assert!(Arc::ptr_eq(&x.data, &y.data), "one copy of each packet");
        }
        assert_eq!(out_a[2].rtp_ts - out_a[0].rtp_ts, 1920);
        assert_eq!(out_b[0].rtp_ts, 50_000, "each viewer's own clock");
        assert_eq!(out_a[1].data[1], 2);
        // A later viewer joining at the live edge gets only what comes after.
        let mut c = RtpClock::new(7);
        let mut out_c = Vec::new();
        let pos_c = cache.read(&queue, &queue.load(), pos_a, |p| c.stamp(p, &mut out_c));
        w.push(page(3, 3840, 4), false, None);
        cache.read(&queue, &queue.load(), pos_c, |p| c.stamp(p, &mut out_c));
        assert_eq!(out_c.len(), 1);
        assert_eq!(out_c[0].data[1], 4);
        // Unread feeds are forgotten at the second sweep.
        cache.sweep();
        assert_eq!(cache.len(), 1);
        cache.sweep();
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_feed_that_fell_out_of_the_window_starts_over_at_the_reader() {
        let mut w = QueueWriter::new(100);
        let queue = w.queue();
        let mut cache = FeedPages::default();
        let mut clock = RtpClock::new(0);
        let mut out = Vec::new();
        let pos = cache.read(&queue, &queue.load(), 0, |p| clock.stamp(p, &mut out));
        for i in 0..6 {
            w.push(page(i, 960 * u64::from(i + 1), i as u8), false, None);
        }
        // Chunks of 68 bytes, 100 retained: only the newest two are there.
        let q = queue.load();
        assert!(q.tail() > pos);
        let end = cache.read(&queue, &q, q.tail(), |p| clock.stamp(p, &mut out));
        assert_eq!(end, q.head);
        assert_eq!(out.len(), q.chunks.len());
        assert_eq!(out.last().unwrap().data[1], 5);
    }
}
