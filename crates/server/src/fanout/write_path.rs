//! The per-listener write path: plan what a listener is due, hand it to the kernel in one
//! `writev` of shared chunks, and account for what was taken. Generic over the writer so the
//! fan-out's cost can be benchmarked without sockets (`benches/`), while shards call it with
//! their `mio` streams.

use std::io::{ErrorKind, IoSlice, Write};

use smallvec::SmallVec;

use crate::fanout::cursor::{Cursor, Plan, SegKind};
use crate::mount::icy_meta::IcyMeta;
use crate::mount::queue::QueueSnapshot;

/// Most segments in one `writev` (Linux accepts 1024): a 64 KiB burst of 100 ms chunks at
/// 32 kbit/s is about 160 segments, plus ICY blocks.
pub const MAX_SEGS: usize = 512;

/// Bytes above which a plan stops adding segments.
pub const MAX_WRITE_BYTES: usize = 256 * 1024;

/// What one write attempt did.
#[derive(Debug)]
pub enum Written {
    /// Nothing was due.
    Nothing,
    /// The kernel took `bytes`, everything planned (`whole`) or only part of it.
    Bytes {
        /// Bytes taken.
        bytes: usize,
        /// All planned bytes were taken.
        whole: bool,
    },
    /// The socket's send buffer is full.
    WouldBlock,
    /// The write failed (peer gone); the listener must be closed.
    Failed(std::io::Error),
}

/// Writes what `cursor` is due from `snapshot` (with ICY blocks from `icy`) in one vectored write
/// of at most about `max_bytes` (the plan stops adding segments once it holds that many: pass
/// [`MAX_WRITE_BYTES`], or less to end the write on a boundary). `kinds` is caller-owned
/// scratch space, reused across listeners.
pub fn write_due<W: Write>(
    mut w: W,
    cursor: &mut Cursor,
    snapshot: &QueueSnapshot,
    icy: &IcyMeta,
    max_bytes: usize,
    kinds: &mut Vec<(SegKind, usize)>,
) -> Written {
    kinds.clear();
    let result = {
        let mut segs = Plan::new();
        cursor.plan(snapshot, icy, MAX_SEGS, max_bytes, &mut segs);
        if segs.is_empty() {
            return Written::Nothing;
        }
        let iov: SmallVec<[IoSlice<'_>; 16]> = segs.iter().map(|s| IoSlice::new(s.bytes)).collect();
        kinds.extend(segs.iter().map(|s| (s.kind, s.bytes.len())));
        w.write_vectored(&iov)
    };
    match result {
        Ok(n) => {
            let total: usize = kinds.iter().map(|k| k.1).sum();
            cursor.advance(kinds, n, icy);
            Written::Bytes {
                bytes: n,
                whole: n == total,
            }
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
            Written::WouldBlock
        }
        Err(e) => Written::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::queue::QueueWriter;
    use bytes::Bytes;

    /// A writer taking at most `cap` bytes per call, recording them.
    struct Capped {
        cap: usize,
        out: Vec<u8>,
    }

    impl Write for &mut Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.cap);
            if n == 0 && !buf.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_resume_exactly() {
        let mut fw = QueueWriter::new(1 << 20);
        for i in 0..10u8 {
            fw.push(Bytes::from(vec![i; 1000]), false, None);
        }
        let snapshot = fw.queue().load();
        let icy = IcyMeta {
            generation: 0,
            block: throng_proto::icy::metadata_block("", None),
        };
        let mut cur = Cursor::new(0, Bytes::from_static(b"HEAD"), None);
        let mut sink = Capped {
            cap: 1500,
            out: Vec::new(),
        };
        let mut kinds = Vec::new();
        let mut writes = 0;
        loop {
            match write_due(
                &mut sink,
                &mut cur,
                &snapshot,
                &icy,
                MAX_WRITE_BYTES,
                &mut kinds,
            ) {
                Written::Nothing => break,
                Written::Bytes { .. } => writes += 1,
                other => panic!("{other:?}"),
            }
        }
        // The default write_vectored takes only the first slice: the head, then one chunk each.
        assert_eq!(writes, 11);
        assert_eq!(&sink.out[..4], b"HEAD");
        assert_eq!(sink.out.len(), 10_004);
        assert!(sink.out[4..]
            .chunks(1000)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&b| b == i as u8)));
        sink.cap = 0;
        fw.push(Bytes::from_static(b"more"), false, None);
        let snapshot = fw.queue().load();
        assert!(matches!(
            write_due(
                &mut sink,
                &mut cur,
                &snapshot,
                &icy,
                MAX_WRITE_BYTES,
                &mut kinds
            ),
            Written::WouldBlock
        ));
    }
}
