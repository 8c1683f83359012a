//! A listener's place in its mount's stream, and the plan of one coalesced write.
//!
//! Per listener the fan-out keeps only a [`Cursor`]: the absolute offset of the next stream byte,
//! bytes still to send before the stream (the response head and, for Ogg, codec header pages),
//! and for ICY listeners the metadata interleaving state. [`Cursor::plan`] lays out one `writev`
//! over the shared chunks (no copy), inserting ICY metadata blocks every `metaint` audio bytes;
//! [`Cursor::advance`] applies however many bytes the kernel took, including partial writes.
//! Pure code: no sockets, so every interleaving rule is unit-tested.

use std::collections::VecDeque;

use bytes::Bytes;
use smallvec::SmallVec;
use throng_proto::icy::EMPTY_BLOCK;

use crate::mount::icy_meta::IcyMeta;
use crate::mount::queue::QueueSnapshot;

/// What a planned segment is, so [`Cursor::advance`] can account for a partial write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegKind {
    /// Bytes of the prefix (response head, Ogg header pages).
    Prefix,
    /// The rest of a metadata block cut by an earlier partial write.
    PendingMeta,
    /// Stream bytes at the cursor's position.
    Audio,
    /// A metadata block due now: `Some(generation)` for a changed block, `None` for the
    /// single zero byte.
    MetaBlock(Option<u64>),
}

/// The segments of one planned write; one second of a 64 kbit/s stream is about 10 chunks, so
/// the common case stays on the stack.
pub type Plan<'a> = SmallVec<[Seg<'a>; 16]>;

/// One planned write segment, borrowed from the queue snapshot, the prefix or the metadata block.
#[derive(Debug, Clone, Copy)]
pub struct Seg<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// What they are.
    pub kind: SegKind,
}

#[derive(Debug)]
struct IcyState {
    metaint: u32,
    until_meta: u32,
    sent_generation: u64,
    pending: Option<Bytes>,
}

/// A listener's position: 48 bytes, plus a small box for ICY listeners and, until it is sent,
/// the queue of its prefix.
#[derive(Debug)]
pub struct Cursor {
    /// Absolute offset of the next stream byte to send.
    pub pos: u64,
    /// Bytes to send before the stream, in order, as shared pieces (`None` when all sent): the
    /// response head, an intro and Ogg header pages are never copied per listener, so a
    /// listener that does not read holds references, not a copy of a large intro.
    prefix: Option<VecDeque<Bytes>>,
    icy: Option<Box<IcyState>>,
}

/// A [`Cursor`] as plain values, to carry a listener across a binary upgrade.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CursorState {
    /// Absolute offset of the next stream byte.
    pub pos: u64,
    /// Bytes still to send before the stream (head, intro, Ogg header pages), in order.
    pub prefix: Vec<Vec<u8>>,
    /// ICY listeners: `(metaint, audio bytes until the next block, generation of the block
    /// last sent, the unsent rest of a block cut by a partial write)`.
    pub icy: Option<(u32, u32, u64, Option<Vec<u8>>)>,
}

impl Cursor {
    /// A cursor starting at stream offset `pos`, sending `prefix` first, with ICY metadata every
    /// `metaint` bytes when given.
    pub fn new(pos: u64, prefix: Bytes, metaint: Option<u32>) -> Cursor {
        Cursor {
            pos,
            prefix: (!prefix.is_empty()).then(|| VecDeque::from([prefix])),
            icy: metaint.map(|m| {
                Box::new(IcyState {
                    metaint: m.max(1),
                    until_meta: m.max(1),
                    sent_generation: u64::MAX,
                    pending: None,
                })
            }),
        }
    }

    /// Its state as plain values.
    pub fn export(&self) -> CursorState {
        CursorState {
            pos: self.pos,
            prefix: self.prefix.iter().flatten().map(|b| b.to_vec()).collect(),
            icy: self.icy.as_ref().map(|i| {
                (
                    i.metaint,
                    i.until_meta,
                    i.sent_generation,
                    i.pending.as_ref().map(|p| p.to_vec()),
                )
            }),
        }
    }

    /// The cursor `state` describes (from [`Cursor::export`]).
    pub fn import(state: CursorState) -> Cursor {
        let prefix: VecDeque<Bytes> = state
            .prefix
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(Bytes::from)
            .collect();
        Cursor {
            pos: state.pos,
            prefix: (!prefix.is_empty()).then_some(prefix),
            icy: state
                .icy
                .map(|(metaint, until_meta, sent_generation, pending)| {
                    Box::new(IcyState {
                        metaint: metaint.max(1),
                        until_meta,
                        sent_generation,
                        pending: pending.map(Bytes::from),
                    })
                }),
        }
    }

    /// Whether bytes outside the queue snapshot (prefix or a cut metadata block) remain to be sent.
    pub fn has_pending(&self) -> bool {
        self.prefix.is_some() || self.icy.as_ref().is_some_and(|i| i.pending.is_some())
    }

    /// Bytes outside the queue snapshot still to send first: the prefix and a cut metadata
    /// block.
    pub fn pending_len(&self) -> usize {
        let prefix: usize = self.prefix.iter().flatten().map(Bytes::len).sum();
        prefix
            + self
                .icy
                .as_ref()
                .and_then(|i| i.pending.as_ref())
                .map_or(0, |p| p.len())
    }

    /// Moves the cursor to `pos` (skip-ahead for a lagging listener), sending `prefix` first
    /// (the Ogg header pages in force there). The ICY interval continues.
    pub fn skip_to(&mut self, pos: u64, prefix: Option<Bytes>) {
        self.pos = pos;
        if let Some(p) = prefix.filter(|p| !p.is_empty()) {
            self.prefix = Some(VecDeque::from([p]));
        }
    }

    /// Moves the cursor to `pos` of another mount's stream (fallback, move): like
    /// [`Cursor::skip_to`], and the new mount's ICY title is sent at the next metadata point,
    /// whatever its generation number.
    pub fn switch_to(&mut self, pos: u64, prefix: Option<Bytes>) {
        self.skip_to(pos, prefix);
        if let Some(icy) = &mut self.icy {
            icy.sent_generation = u64::MAX;
        }
    }

    /// Adds `bytes` to send after the current prefix and before the stream.
    pub fn push_prefix(&mut self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.prefix
                .get_or_insert_with(Default::default)
                .push_back(bytes);
        }
    }

    /// Adds `intro` audio (Icecast `<intro>`) after the prefix and before the stream. For an ICY
    /// listener the intro is counted in the metadata interval: blocks are inserted into it every
    /// `metaint` bytes, the first one carrying `meta`, so the stream continues the interval.
    /// The intro's bytes are shared, not copied.
    pub fn add_intro(&mut self, intro: &Bytes, meta: &IcyMeta) {
        if intro.is_empty() {
            return;
        }
        let Some(icy) = &mut self.icy else {
            let piece = intro.clone();
            self.push_prefix(piece);
            return;
        };
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < intro.len() {
            if icy.until_meta == 0 {
                if meta.generation != icy.sent_generation {
                    pieces.push(meta.block.clone());
                    icy.sent_generation = meta.generation;
                } else {
                    pieces.push(Bytes::from_static(EMPTY_BLOCK));
                }
                icy.until_meta = icy.metaint;
            }
            let take = (intro.len() - at).min(icy.until_meta as usize);
            pieces.push(intro.slice(at..at + take));
            icy.until_meta -= take as u32;
            at += take;
        }
        for p in pieces {
            self.push_prefix(p);
        }
    }

    /// Plans one write of at most `max_segs` segments and about `max_bytes` bytes into `out`:
    /// pending bytes first, then stream bytes from the cursor to the snapshot's head with metadata
    /// blocks interleaved. Plans nothing from the snapshot if the position is outside it.
    pub fn plan<'a>(
        &'a self,
        snapshot: &'a QueueSnapshot,
        meta: &'a IcyMeta,
        max_segs: usize,
        max_bytes: usize,
        out: &mut Plan<'a>,
    ) {
        let mut bytes = 0usize;
        for p in self.prefix.iter().flat_map(|q| q.iter()) {
            if out.len() >= max_segs || bytes >= max_bytes {
                return;
            }
            out.push(Seg {
                bytes: p,
                kind: SegKind::Prefix,
            });
            bytes += p.len();
        }
        if let Some(p) = self.icy.as_ref().and_then(|i| i.pending.as_ref()) {
            out.push(Seg {
                bytes: p,
                kind: SegKind::PendingMeta,
            });
            bytes += p.len();
        }
        let Some(mut idx) = snapshot.chunk_index(self.pos) else {
            return;
        };
        let mut pos = self.pos;
        let (mut until, mut sent) = self
            .icy
            .as_ref()
            .map_or((u32::MAX, 0), |i| (i.until_meta, i.sent_generation));
        'chunks: while idx < snapshot.chunks.len() {
            let c = &snapshot.chunks[idx];
            let mut data = &c.data[(pos - c.start) as usize..];
            while !data.is_empty() {
                if out.len() >= max_segs || bytes >= max_bytes {
                    break 'chunks;
                }
                if let Some(icy) = &self.icy {
                    if until == 0 {
                        let seg = if meta.generation != sent {
                            sent = meta.generation;
                            Seg {
                                bytes: &meta.block,
                                kind: SegKind::MetaBlock(Some(meta.generation)),
                            }
                        } else {
                            Seg {
                                bytes: EMPTY_BLOCK,
                                kind: SegKind::MetaBlock(None),
                            }
                        };
                        bytes += seg.bytes.len();
                        out.push(seg);
                        until = icy.metaint;
                        continue;
                    }
                }
                let take = data.len().min(until as usize);
                out.push(Seg {
                    bytes: &data[..take],
                    kind: SegKind::Audio,
                });
                bytes += take;
                pos += take as u64;
                if self.icy.is_some() {
                    until -= take as u32;
                }
                data = &data[take..];
            }
            idx += 1;
        }
    }

    /// Applies a write of `written` bytes over the planned segments `kinds` (kind and length of
    /// each, in order). `meta` must be the block the plan was made with.
    #[inline]
    pub fn advance(&mut self, kinds: &[(SegKind, usize)], mut written: usize, meta: &IcyMeta) {
        for &(kind, len) in kinds {
            let k = written.min(len);
            written -= k;
            match kind {
                SegKind::Prefix => {
                    if let Some(q) = &mut self.prefix {
                        if k < len {
                            if let Some(front) = q.front_mut() {
                                *front = front.slice(k..);
                            }
                        } else {
                            q.pop_front();
                        }
                        if q.is_empty() {
                            self.prefix = None;
                        }
                    }
                }
                SegKind::PendingMeta => {
                    if let Some(icy) = &mut self.icy {
                        icy.pending = match icy.pending.take() {
                            Some(p) if k < len => Some(p.slice(k..)),
                            _ => None,
                        };
                    }
                }
                SegKind::Audio => {
                    self.pos += k as u64;
                    if let Some(icy) = &mut self.icy {
                        icy.until_meta -= k as u32;
                    }
                }
                SegKind::MetaBlock(generation) => {
                    if k == 0 {
                        return;
                    }
                    if let Some(icy) = &mut self.icy {
                        if let Some(g) = generation {
                            icy.sent_generation = g;
                        }
                        icy.until_meta = icy.metaint;
                        if k < len {
                            icy.pending = Some(meta.block.slice(k..));
                        }
                    }
                }
            }
            if k < len {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::queue::QueueWriter;
    use throng_proto::icy::{metadata_block, stream_title, IcyDemuxer, IcyPiece};

    fn meta(generation: u64, title: &str) -> IcyMeta {
        IcyMeta {
            generation,
            block: metadata_block(title, None),
        }
    }

    /// Writes everything available with writes capped at `cap` bytes; returns the bytes sent.
    fn drain(cur: &mut Cursor, snapshot: &QueueSnapshot, m: &IcyMeta, cap: usize) -> Vec<u8> {
        let mut sent = Vec::new();
        loop {
            let mut segs = Plan::new();
            cur.plan(snapshot, m, 8, 1 << 20, &mut segs);
            if segs.is_empty() {
                return sent;
            }
            let kinds: Vec<(SegKind, usize)> =
                segs.iter().map(|s| (s.kind, s.bytes.len())).collect();
            let all: Vec<u8> = segs.iter().flat_map(|s| s.bytes.iter().copied()).collect();
            let n = all.len().min(cap);
            sent.extend_from_slice(&all[..n]);
            drop(segs);
            cur.advance(&kinds, n, m);
        }
    }

    fn ring_of(sizes: &[usize]) -> (QueueWriter, Vec<u8>) {
        let mut w = QueueWriter::new(1 << 30);
        let mut all = Vec::new();
        let mut v = 0u8;
        for &s in sizes {
            let chunk: Vec<u8> = (0..s)
                .map(|_| {
                    v = v.wrapping_add(7);
                    v
                })
                .collect();
            all.extend_from_slice(&chunk);
            w.push(Bytes::from(chunk), false, None);
        }
        (w, all)
    }

    /// Splits an ICY stream into its audio and its non-empty titles.
    fn demux(sent: &[u8], metaint: usize) -> (Vec<u8>, Vec<String>) {
        let mut audio = Vec::new();
        let mut titles = Vec::new();
        IcyDemuxer::new(metaint)
            .feed(sent, |p| match p {
                IcyPiece::Audio(a) => audio.extend_from_slice(a),
                IcyPiece::Metadata(m) if !m.is_empty() => titles.push(stream_title(&m).unwrap()),
                IcyPiece::Metadata(_) => {}
            })
            .unwrap();
        (audio, titles)
    }

    #[test]
    fn a_cursor_carried_across_an_upgrade_sends_the_same_bytes() {
        let (w, _) = ring_of(&[300, 500, 700, 400]);
        let snapshot = w.queue().load();
        let m = meta(3, "Artist - Title");
        let fresh = || {
            let mut c = Cursor::new(0, Bytes::from_static(b"HEAD\r\n\r\n"), Some(64));
            c.push_prefix(Bytes::from_static(b"OGGHEADERS"));
            c
        };
        let whole = drain(&mut fresh(), &snapshot, &m, 1 << 20);
        // Stop after every possible byte count (inside the head, a block, the audio), carry
        // the cursor over, and finish: the bytes are the same.
        for cut in 0..whole.len() {
            let mut c = fresh();
            let mut first = Vec::new();
            while first.len() < cut {
                let mut segs = Plan::new();
                c.plan(&snapshot, &m, 8, 1 << 20, &mut segs);
                let kinds: Vec<(SegKind, usize)> =
                    segs.iter().map(|s| (s.kind, s.bytes.len())).collect();
                let all: Vec<u8> = segs.iter().flat_map(|s| s.bytes.iter().copied()).collect();
                let n = all.len().min(cut - first.len());
                first.extend_from_slice(&all[..n]);
                drop(segs);
                c.advance(&kinds, n, &m);
            }
            let mut carried = Cursor::import(c.export());
            first.extend(drain(&mut carried, &snapshot, &m, 1 << 20));
            assert_eq!(first, whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_intro_counts_in_the_icy_interval_and_the_stream_continues_it() {
        let (w, all) = ring_of(&[500, 500]);
        let snapshot = w.queue().load();
        let intro: Vec<u8> = (0..750u32).map(|i| (i % 251) as u8).collect();
        for cap in [1, 7, 300, usize::MAX] {
            let m = meta(4, "Now");
            let mut cur = Cursor::new(0, Bytes::from_static(b"H\r\n\r\n"), Some(200));
            cur.add_intro(&Bytes::from(intro.clone()), &m);
            let sent = drain(&mut cur, &snapshot, &m, cap);
            assert_eq!(&sent[..5], b"H\r\n\r\n");
            let (audio, titles) = demux(&sent[5..], 200);
            let mut expect = intro.clone();
            expect.extend_from_slice(&all);
            assert_eq!(audio, expect, "cap {cap}");
            assert_eq!(
                titles,
                vec!["Now".to_owned()],
                "the title once, in the intro"
            );
        }
        // Without ICY the intro is plain bytes after the prefix.
        let mut cur = Cursor::new(0, Bytes::from_static(b"H"), None);
        cur.add_intro(&Bytes::from(intro.clone()), &meta(0, ""));
        let sent = drain(&mut cur, &snapshot, &meta(0, ""), usize::MAX);
        assert_eq!(&sent[1..751], &intro[..]);
    }

    #[test]
    fn an_intro_is_shared_not_copied_per_listener() {
        // A listener that does not read must not hold a copy of a large intro.
        let (w, _) = ring_of(&[500]);
        let snapshot = w.queue().load();
        let intro = Bytes::from(vec![7u8; 100_000]);
        let range = intro.as_ptr() as usize..intro.as_ptr() as usize + intro.len();
        for metaint in [None, Some(16_000)] {
            let m = meta(1, "Now");
            let mut cur = Cursor::new(0, Bytes::from_static(b"HEAD"), metaint);
            cur.add_intro(&intro, &m);
            let mut segs = Plan::new();
            cur.plan(&snapshot, &m, 512, usize::MAX, &mut segs);
            let intro_bytes: usize = segs
                .iter()
                .filter(|s| s.kind == SegKind::Prefix && s.bytes.len() > 1000)
                .inspect(|s| assert!(range.contains(&(s.bytes.as_ptr() as usize))))
                .map(|s| s.bytes.len())
                .sum();
            assert_eq!(intro_bytes, intro.len(), "metaint {metaint:?}");
        }
    }

    #[test]
    fn a_switch_resends_the_title_of_the_new_mount_and_keeps_the_interval() {
        let (w, all) = ring_of(&[300, 300]);
        let snapshot = w.queue().load();
        let mut cur = Cursor::new(0, Bytes::new(), Some(250));
        let m = meta(1, "Live");
        let mut sent = drain(&mut cur, &snapshot, &m, usize::MAX);
        // The fallback mount has its own generations: the same number must not hide its title.
        let (w2, all2) = ring_of(&[400]);
        let snapshot2 = w2.queue().load();
        cur.switch_to(0, None);
        sent.extend(drain(
            &mut cur,
            &snapshot2,
            &meta(1, "Fallback"),
            usize::MAX,
        ));
        let (audio, titles) = demux(&sent, 250);
        let mut expect = all.clone();
        expect.extend_from_slice(&all2);
        assert_eq!(audio, expect);
        assert_eq!(titles, vec!["Live".to_owned(), "Fallback".to_owned()]);
    }

    #[test]
    fn plain_listener_gets_prefix_then_stream_under_any_partial_writes() {
        let (w, all) = ring_of(&[100, 333, 1, 4000, 77]);
        let snapshot = w.queue().load();
        for cap in [1, 5, 99, 1000, usize::MAX] {
            let mut cur = Cursor::new(433, Bytes::from_static(b"HEAD\r\n\r\n"), None);
            let sent = drain(&mut cur, &snapshot, &meta(0, ""), cap);
            assert_eq!(&sent[..8], b"HEAD\r\n\r\n");
            assert_eq!(&sent[8..], &all[433..], "cap {cap}");
            assert_eq!(cur.pos, snapshot.head);
            assert!(!cur.has_pending());
        }
    }

    #[test]
    fn icy_blocks_every_metaint_bytes_and_only_on_change() {
        let (w, all) = ring_of(&[1000; 10]);
        let snapshot = w.queue().load();
        for cap in [1, 3, 250, 777, usize::MAX] {
            let mut cur = Cursor::new(0, Bytes::new(), Some(300));
            let m1 = meta(1, "First");
            let mut sent = drain(&mut cur, &snapshot, &m1, cap);
            // A metadata change, then more stream.
            let mut w2 = QueueWriter::new(1 << 30);
            w2.push(Bytes::from(all.clone()), false, None);
            w2.push(Bytes::from(vec![9u8; 1000]), false, None);
            let snapshot2 = w2.queue().load();
            let m2 = meta(2, "Second");
            sent.extend(drain(&mut cur, &snapshot2, &m2, cap));
            let mut audio = Vec::new();
            let mut titles = Vec::new();
            let mut d = IcyDemuxer::new(300);
            d.feed(&sent, |p| match p {
                IcyPiece::Audio(a) => audio.extend_from_slice(a),
                IcyPiece::Metadata(m) => titles.push(stream_title(&m)),
            })
            .unwrap();
            let mut expected = all.clone();
            expected.extend_from_slice(&[9u8; 1000]);
            assert_eq!(audio, expected, "cap {cap}");
            // 11000 bytes / 300 = 36 metadata points; block sent at the first and after change.
            assert_eq!(titles.len(), 36);
            assert_eq!(titles[0].as_deref(), Some("First"));
            let changed: Vec<usize> = titles
                .iter()
                .enumerate()
                .filter(|(_, t)| t.is_some())
                .map(|(i, _)| i)
                .collect();
            assert_eq!(changed, [0, 33], "cap {cap}");
            assert_eq!(titles[33].as_deref(), Some("Second"));
        }
    }

    #[test]
    fn plan_respects_segment_limit_and_stops_outside_ring() {
        let (w, _) = ring_of(&[10; 20]);
        let snapshot = w.queue().load();
        let m = meta(0, "");
        let cur = Cursor::new(0, Bytes::new(), None);
        let mut segs = Plan::new();
        cur.plan(&snapshot, &m, 4, usize::MAX, &mut segs);
        assert_eq!(segs.len(), 4);
        let cur = Cursor::new(snapshot.head, Bytes::new(), None);
        let mut segs = Plan::new();
        cur.plan(&snapshot, &m, 4, usize::MAX, &mut segs);
        assert!(segs.is_empty());
    }
}
