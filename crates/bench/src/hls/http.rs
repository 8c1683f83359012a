//! One HTTP/1.1 response at a time on a player's keep-alive connection, sans-IO: the response
//! head (at most [`MAX_HEAD`] bytes, kept only until parsed), then the body as it arrives,
//! framed by `Content-Length`, by chunked transfer coding (RFC 9112 section 7.1: chunk sizes,
//! extensions and trailers read and dropped) or, without either, by the server's close
//! (RFC 9112 section 6.3). Interim `1xx` responses are passed over. Nothing of the body is
//! kept: [`Reader::next`] hands out slices of what it was given.

use throng_proto::http::{parse_response_head, ResponseHead};

/// Largest response head accepted (bytes).
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest chunk-size line (size, extensions) or trailer line accepted (bytes).
const MAX_CHUNK_LINE: u32 = 4096;

/// A response the reader cannot frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// The head does not parse, or is over [`MAX_HEAD`].
    BadHead,
    /// Chunked transfer coding that does not parse (a size that is no hex number, a chunk not
    /// followed by CRLF, an over-long line).
    BadChunk,
}

/// The facts of a response head a player uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// Body length when framed by `Content-Length` (bytes).
    pub content_length: Option<u64>,
    /// The connection stays open after this response (HTTP/1.1 without `Connection: close`,
    /// or HTTP/1.0 with `Connection: keep-alive`, and a body not framed by the close).
    pub keep_alive: bool,
}

/// What [`Reader::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// More bytes are needed.
    More,
    /// The response head.
    Head(Head),
    /// Body bytes.
    Body(&'a [u8]),
    /// The response is complete.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the size line: the size so far, whether an extension began, bytes read.
    Size { size: u64, ext: bool, read: u32 },
    /// In the chunk's data: bytes left.
    Data(u64),
    /// The CRLF after a chunk's data: bytes of it seen.
    DataEnd(u8),
    /// The trailer section: bytes of the current line.
    Trailer(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Gathering the head.
    Head(Vec<u8>),
    /// `Content-Length` body: bytes left.
    Length(u64),
    /// Chunked body.
    Chunked(Chunk),
    /// Body until the server closes.
    Close,
    /// Complete.
    Done,
}

/// The reader of one response (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    state: State,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::new()
    }
}

impl Reader {
    /// A reader waiting for a response head.
    pub fn new() -> Reader {
        Reader {
            state: State::Head(Vec::new()),
        }
    }

    /// Whether no byte of the response came yet.
    pub fn untouched(&self) -> bool {
        matches!(&self.state, State::Head(h) if h.is_empty())
    }

    /// Whether the head was read (the body is being read, or the response is done).
    pub fn has_head(&self) -> bool {
        !matches!(self.state, State::Head(_))
    }

    /// Whether the body ends at the server's close.
    pub fn until_close(&self) -> bool {
        self.state == State::Close
    }

    /// The server closed the connection: `true` when that completes the response (a body
    /// framed by the close), `false` when the response is cut short.
    pub fn closed(&mut self) -> bool {
        if self.state == State::Close {
            self.state = State::Done;
            return true;
        }
        self.state == State::Done
    }

    /// Reads from `data`: returns how many bytes were used and what they made. Call again with
    /// the rest until it answers [`Piece::More`] (all used) or [`Piece::Done`].
    ///
    /// Errors: see [`HttpError`].
    pub fn next<'a>(&mut self, data: &'a [u8]) -> Result<(usize, Piece<'a>), HttpError> {
        // Interim responses are passed over in a loop (a server may send many).
        let mut skipped = 0;
        while matches!(self.state, State::Head(_)) {
            match self.head(&data[skipped..])? {
                (used, Some(head)) if (100..200).contains(&head.status) => {
                    self.state = State::Head(Vec::new());
                    skipped += used;
                }
                (used, Some(head)) => {
                    let head = self.start_body(&head)?;
                    return Ok((skipped + used, Piece::Head(head)));
                }
                (used, None) => return Ok((skipped + used, Piece::More)),
            }
        }
        match &mut self.state {
            State::Head(_) => Ok((skipped, Piece::More)),
            State::Length(0) => {
                self.state = State::Done;
                Ok((0, Piece::Done))
            }
            State::Length(left) => {
                if data.is_empty() {
                    return Ok((0, Piece::More));
                }
                let take = (*left).min(data.len() as u64) as usize;
                *left -= take as u64;
                Ok((take, Piece::Body(&data[..take])))
            }
            State::Close => {
                if data.is_empty() {
                    return Ok((0, Piece::More));
                }
                Ok((data.len(), Piece::Body(data)))
            }
            State::Chunked(_) => self.chunked(data),
            State::Done => Ok((0, Piece::Done)),
        }
    }

    /// Gathers the head from `data`: the bytes used and the head once whole.
    ///
    /// Errors: [`HttpError::BadHead`].
    fn head(&mut self, data: &[u8]) -> Result<(usize, Option<ResponseHead>), HttpError> {
        let State::Head(buf) = &mut self.state else {
            return Ok((0, None));
        };
        // The common case, a head whole in one read, is parsed in place.
        if buf.is_empty() {
            match parse_response_head(data) {
                Ok(Some((h, len))) => return Ok((len, Some(h))),
                Ok(None) => {}
                Err(_) => return Err(HttpError::BadHead),
            }
        }
        let before = buf.len();
        buf.extend_from_slice(&data[..data.len().min(MAX_HEAD + 1)]);
        match parse_response_head(buf) {
            // Bytes of `data` past the head are handed back unused.
            Ok(Some((h, len))) => Ok((len.saturating_sub(before), Some(h))),
            Ok(None) if buf.len() > MAX_HEAD => Err(HttpError::BadHead),
            Ok(None) => Ok((data.len(), None)),
            Err(_) => Err(HttpError::BadHead),
        }
    }

    /// The framing of the body after `head`.
    fn start_body(&mut self, head: &ResponseHead) -> Result<Head, HttpError> {
        let header = |name: &str| head.header(name).map(str::trim);
        let chunked = header("transfer-encoding").is_some_and(|t| {
            t.rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
        let content_length = if chunked {
            None
        } else {
            match header("content-length") {
                Some(v) => Some(v.parse::<u64>().map_err(|_| HttpError::BadHead)?),
                None => None,
            }
        };
        let connection = header("connection").map(str::to_ascii_lowercase);
        let close_asked = connection.as_deref().is_some_and(|c| c.contains("close"));
        let keep_asked = connection
            .as_deref()
            .is_some_and(|c| c.contains("keep-alive"));
        let http11 = head.version == "HTTP/1.1";
        let framed = chunked || content_length.is_some();
        self.state = if chunked {
            State::Chunked(Chunk::Size {
                size: 0,
                ext: false,
                read: 0,
            })
        } else if let Some(n) = content_length {
            State::Length(n)
        } else if matches!(head.status, 204 | 304) {
            State::Length(0)
        } else {
            State::Close
        };
        Ok(Head {
            status: head.status,
            content_type: head.header("content-type").map(str::to_owned),
            content_length,
            keep_alive: (framed || matches!(head.status, 204 | 304))
                && !close_asked
                && (http11 || keep_asked),
        })
    }

    /// Reads chunked transfer coding.
    fn chunked<'a>(&mut self, data: &'a [u8]) -> Result<(usize, Piece<'a>), HttpError> {
        let State::Chunked(c) = &mut self.state else {
            return Ok((0, Piece::More));
        };
        let mut at = 0;
        while at < data.len() {
            let b = data[at];
            match c {
                Chunk::Size { size, ext, read } => {
                    at += 1;
                    *read += 1;
                    if *read > MAX_CHUNK_LINE {
                        return Err(HttpError::BadChunk);
                    }
                    match b {
                        b'\n' => {
                            if *read == 1 {
                                return Err(HttpError::BadChunk);
                            }
                            *c = if *size == 0 {
                                Chunk::Trailer(0)
                            } else {
                                Chunk::Data(*size)
                            };
                        }
                        b'\r' => {}
                        _ if *ext => {}
                        b';' | b' ' | b'\t' => *ext = true,
                        _ => {
                            let d = (b as char).to_digit(16).ok_or(HttpError::BadChunk)?;
                            *size = size
                                .checked_mul(16)
                                .and_then(|s| s.checked_add(u64::from(d)))
                                .ok_or(HttpError::BadChunk)?;
                        }
                    }
                }
                Chunk::Data(left) => {
                    let take = (*left).min((data.len() - at) as u64) as usize;
                    *left -= take as u64;
                    if *left == 0 {
                        *c = Chunk::DataEnd(0);
                    }
                    let body = &data[at..at + take];
                    return Ok((at + take, Piece::Body(body)));
                }
                Chunk::DataEnd(seen) => {
                    at += 1;
                    match (b, *seen) {
                        (b'\r', 0) => *seen = 1,
                        (b'\n', _) => {
                            *c = Chunk::Size {
                                size: 0,
                                ext: false,
                                read: 0,
                            }
                        }
                        _ => return Err(HttpError::BadChunk),
                    }
                }
                Chunk::Trailer(len) => {
                    at += 1;
                    match b {
                        b'\n' if *len == 0 => {
                            self.state = State::Done;
                            return Ok((at, Piece::Done));
                        }
                        b'\n' => *len = 0,
                        b'\r' => {}
                        _ => {
                            *len += 1;
                            if *len > MAX_CHUNK_LINE {
                                return Err(HttpError::BadChunk);
                            }
                        }
                    }
                }
            }
        }
        Ok((at, Piece::More))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `n` bytes; the head and the body gathered, and whether done.
    fn read(wire: &[u8], n: usize) -> Result<(Option<Head>, Vec<u8>, bool), HttpError> {
        let mut r = Reader::new();
        let (mut head, mut body, mut done) = (None, Vec::new(), false);
        for piece in wire.chunks(n.max(1)) {
            let mut at = 0;
            loop {
                let (used, p) = r.next(&piece[at..])?;
                at += used;
                match p {
                    Piece::More => break,
                    Piece::Head(h) => head = Some(h),
                    Piece::Body(b) => body.extend_from_slice(b),
                    Piece::Done => {
                        done = true;
                        break;
                    }
                }
            }
            assert!(done || at == piece.len(), "all bytes used");
        }
        Ok((head, body, done))
    }

    #[test]
    fn content_length_bodies_in_any_pieces() {
        let wire =
            b"HTTP/1.1 200 OK\r\nContent-Type: audio/mpeg\r\nContent-Length: 10\r\n\r\n0123456789";
        for n in [1, 3, 7, 70, wire.len()] {
            let (h, body, done) = read(wire, n).unwrap();
            let h = h.unwrap();
            assert_eq!(
                (h.status, h.content_length, h.keep_alive),
                (200, Some(10), true)
            );
            assert_eq!(h.content_type.as_deref(), Some("audio/mpeg"));
            assert_eq!(body, b"0123456789", "pieces of {n}");
            assert!(done);
        }
        // HTTP/1.0 closes unless asked; `Connection: close` closes.
        let (h, _, _) = read(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 5).unwrap();
        assert!(!h.unwrap().keep_alive);
        let (h, _, _) = read(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            5,
        )
        .unwrap();
        assert!(h.unwrap().keep_alive);
        let (h, _, _) = read(
            b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            9,
        )
        .unwrap();
        let h = h.unwrap();
        assert_eq!((h.status, h.keep_alive), (404, false));
    }

    #[test]
    fn chunked_bodies_drop_sizes_extensions_and_trailers() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            4;name=v\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
        for n in [1, 2, 5, 13, wire.len()] {
            let (h, body, done) = read(wire, n).unwrap();
            assert!(h.unwrap().keep_alive);
            assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.", "pieces of {n}");
            assert!(done);
        }
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(read(bad, 4), Err(HttpError::BadChunk));
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n";
        assert_eq!(read(bad, 4), Err(HttpError::BadChunk));
    }

    #[test]
    fn close_framed_bodies_end_at_the_close() {
        let mut r = Reader::new();
        let (used, p) = r.next(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert!(matches!(
            p,
            Piece::Head(Head {
                keep_alive: false,
                ..
            })
        ));
        let (_, p) = r.next(&b"HTTP/1.0 200 OK\r\n\r\nabc"[used..]).unwrap();
        assert_eq!(p, Piece::Body(b"abc"));
        assert!(r.until_close());
        assert!(r.closed());
        // Cut short: a Content-Length body the close interrupts.
        let mut r = Reader::new();
        let _ = r
            .next(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")
            .unwrap();
        assert!(!r.closed());
    }

    #[test]
    fn interim_responses_and_bad_heads() {
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let (h, body, done) = read(wire, 6).unwrap();
        assert_eq!(
            (h.unwrap().status, body.as_slice(), done),
            (200, &b"ok"[..], true)
        );
        assert_eq!(
            read(b"\x16\x03\x01\x02\x00garbage\r\n\r\n", 3),
            Err(HttpError::BadHead)
        );
        assert_eq!(
            read(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 3),
            Err(HttpError::BadHead)
        );
        let huge = vec![b'a'; MAX_HEAD + 10];
        assert_eq!(read(&huge, 4096), Err(HttpError::BadHead));
    }
}
