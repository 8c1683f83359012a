//! The bytes a listener of a mount is answered first: the Icecast response head
//! (`throng_proto::listener_head`, with this server's id, the date, the mount's type and
//! stream headers, `icy-metaint` and the configured extra headers), and the whole answer to
//! Safari's probe `Range: bytes=0-1` (`206` and the first 2 bytes a listener joining now would
//! get).

use throng_proto::listener_head::ListenerHead;

use crate::ctx::ServerCtx;
use crate::mount::live::Mount;
use crate::mount::queue::QueueSnapshot;

/// The listener head of `mount` from server `server_id` at `date` with the configured `extra`
/// headers; `metaint`: the ICY metadata interval announced
/// (bytes of audio between blocks), `None` for no ICY metadata.
fn listener_head<'a>(
    server_id: &'a str,
    mount: &'a Mount,
    date: &'a str,
    extra: &'a [(String, String)],
    metaint: Option<u32>,
) -> ListenerHead<'a> {
    ListenerHead {
        server_id,
        date,
        content_type: &mount.settings.content_type,
        stream_headers: mount.description().stream_headers.clone(),
        metaint: metaint.map(|m| m as usize),
        extra_headers: extra,
    }
}

/// Builds the response head for a listener of `mount`; `metaint` as for ICY metadata (bytes
/// of audio between blocks, `None` for none).
pub fn response_head(ctx: &ServerCtx, mount: &Mount, metaint: Option<u32>) -> Vec<u8> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let config = ctx.config();
    let extra = config.http_headers_for(&mount.name);
    listener_head(&config.server_id, mount, &date, &extra, metaint).to_bytes()
}

/// The answer to Safari's probe on `mount`: the `206` head, then (unless `head_only`) the
/// first 2 bytes a listener joining now would get (the Ogg header pages first, if any). No
/// ICY metadata is announced.
pub fn probe_answer(ctx: &ServerCtx, mount: &Mount, head_only: bool) -> Vec<u8> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let config = ctx.config();
    let extra = config.http_headers_for(&mount.name);
    let mut bytes = listener_head(&config.server_id, mount, &date, &extra, None).probe_bytes();
    let body = first_bytes(&mount.queue.load(), mount.burst_size(), 2);
    if !head_only {
        bytes.extend_from_slice(&body);
    }
    bytes
}

/// The first `n` bytes (fewer if the queue holds fewer) a listener joining `q` now with a
/// burst of `burst` bytes would get: the Ogg header pages, if any, then the queue from the
/// join point (`QueueSnapshot::join_point`).
fn first_bytes(q: &QueueSnapshot, burst: u64, n: usize) -> Vec<u8> {
    let (pos, headers) = q.join_point(burst);
    let mut body: Vec<u8> = headers.map(|h| h.to_vec()).unwrap_or_default();
    if let Some(i) = q.chunk_index(pos) {
        let skip = (pos - q.chunks[i].start) as usize;
        for (k, c) in q.chunks[i..].iter().enumerate() {
            if body.len() >= n {
                break;
            }
            body.extend_from_slice(&c.data[if k == 0 { skip } else { 0 }..]);
        }
    }
    body.truncate(n);
    body
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::mount::queue::Chunk;

    fn chunk(start: u64, data: &'static [u8], ogg_headers: Option<&'static [u8]>) -> Chunk {
        Chunk {
            start,
            data: Bytes::from_static(data),
            ogg_headers: ogg_headers.map(|h| Arc::new(Bytes::from_static(h))),
            is_header: false,
        }
    }

    #[test]
    fn the_probe_bytes_span_chunks_from_the_join_point() {
        let q = QueueSnapshot {
            chunks: vec![chunk(0, b"a", None), chunk(1, b"bcd", None)],
            head: 4,
            ..QueueSnapshot::default()
        };
        assert_eq!(first_bytes(&q, u64::MAX, 2), b"ab");
        assert_eq!(first_bytes(&q, u64::MAX, 9), b"abcd");
    }

    #[test]
    fn an_ogg_listener_gets_the_header_pages_first() {
        let q = QueueSnapshot {
            chunks: vec![chunk(0, b"xyz", Some(b"OggS"))],
            head: 3,
            ..QueueSnapshot::default()
        };
        assert_eq!(first_bytes(&q, u64::MAX, 2), b"Og");
    }

    #[test]
    fn an_empty_queue_gives_no_bytes() {
        assert!(first_bytes(&QueueSnapshot::default(), u64::MAX, 2).is_empty());
    }
}
