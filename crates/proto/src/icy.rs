//! ICY (SHOUTcast) in-band metadata, as Icecast 2.4.4 `format_mp3.c` writes and reads it.
//!
//! A listener that sends `Icy-MetaData: 1` gets `icy-metaint: N` and, after every N bytes of
//! audio, one metadata block: a length byte L, then L × 16 bytes holding
//! `StreamTitle='...';[StreamUrl='...';]`, NUL-padded (L ≤ 255). A block is sent only when the
//! metadata changed for that listener; otherwise the block is the single byte `0`.
//! [`IcyDemuxer`] strips such blocks from a source's or relay's stream.

use bytes::Bytes;
use thiserror::Error;

/// Icecast's default metadata interval in bytes (`format_mp3.c`, `ICY_METADATA_INTERVAL`).
pub const DEFAULT_METAINT: usize = 16000;

/// Largest metadata payload: 255 × 16 bytes.
pub const MAX_METADATA_BYTES: usize = 255 * 16;

/// The block sent when the metadata did not change: a single zero length byte.
pub const EMPTY_BLOCK: &[u8] = &[0];

/// Truncates `s` to at most `max` bytes on a UTF-8 character boundary.
fn truncate_to(s: &str, max: usize) -> &str {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// `text` without control characters (Unicode `Cc`: NUL, C0, DEL and C1): tab, CR and LF
/// become a space, the others are removed. Titles come from sources (inline ICY blocks, Ogg
/// comments) and admin requests; a NUL would end the title early for players that read the
/// block as a C string (the block's padding is NUL), and CR/LF would break status pages and logs.
pub fn clean_title(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .filter_map(|c| match c {
            '\t' | '\r' | '\n' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect::<String>()
        .into()
}

/// Builds one metadata block (length byte plus NUL-padded payload) for `title` and optional
/// `url`, as `StreamTitle='title';StreamUrl='url';`. Control characters are first removed from
/// both ([`clean_title`]). Within [`MAX_METADATA_BYTES`] the title is shortened first (then the
/// URL is left out), so the block always ends with `';`.
pub fn metadata_block(title: &str, url: Option<&str>) -> Bytes {
    const TITLE_FRAME: usize = "StreamTitle='';".len();
    let title = clean_title(title);
    let url = url.map(clean_title);
    let url = url.as_deref();
    let title = truncate_to(&title, MAX_METADATA_BYTES - TITLE_FRAME);
    let mut payload = format!("StreamTitle='{title}';");
    if let Some(u) = url {
        let url_part = format!("StreamUrl='{u}';");
        if payload.len() + url_part.len() <= MAX_METADATA_BYTES {
            payload.push_str(&url_part);
        }
    }
    let blocks = payload.len().div_ceil(16).max(1);
    let mut out = Vec::with_capacity(1 + blocks * 16);
    out.push(blocks as u8);
    out.extend_from_slice(payload.as_bytes());
    out.resize(1 + blocks * 16, 0);
    Bytes::from(out)
}

/// Extracts the value of `StreamTitle='...'` from a block payload (NUL padding ignored).
pub fn stream_title(payload: &[u8]) -> Option<String> {
    field(payload, "StreamTitle='")
}

/// Extracts the value of `StreamUrl='...'` from a block payload, if present.
pub fn stream_url(payload: &[u8]) -> Option<String> {
    field(payload, "StreamUrl='")
}

fn field(payload: &[u8], key: &str) -> Option<String> {
    let text = crate::http::decode_text(payload);
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let end = rest.find("';").unwrap_or(rest.trim_end_matches('\0').len());
    Some(rest[..end].to_owned())
}

/// Errors from [`IcyDemuxer::feed`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IcyError {
    /// A non-empty block did not start with `StreamTitle=` (Icecast 2.4.4 ends such a source,
    /// `format_mp3.c:mp3_get_filter_meta`); the payload's first bytes are kept for the log.
    #[error("metadata block does not start with StreamTitle=: {0:?}")]
    BadBlock(String),
}

/// One piece of a de-interleaved ICY stream.
#[derive(Debug, PartialEq, Eq)]
pub enum IcyPiece<'a> {
    /// Audio bytes, borrowed from the input.
    Audio(&'a [u8]),
    /// One metadata block's payload with trailing NUL padding removed; empty for a zero block.
    Metadata(Vec<u8>),
}

/// Splits a stream with ICY metadata every `metaint` bytes into audio and metadata (sans-IO).
#[derive(Debug, Clone)]
pub struct IcyDemuxer {
    metaint: usize,
    /// Audio bytes left before the next length byte.
    audio_left: usize,
    /// Metadata bytes still expected for the block being read (`None` while reading audio).
    meta_left: Option<usize>,
    meta: Vec<u8>,
}

/// Where an [`IcyDemuxer`] is in its stream, as plain values (to carry it across a binary
/// upgrade).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcyDemuxState {
    /// The stream's `icy-metaint`, in bytes.
    pub metaint: usize,
    /// Audio bytes left before the next length byte.
    pub audio_left: usize,
    /// Metadata bytes still expected for the block being read (`None` while reading audio).
    pub meta_left: Option<usize>,
    /// The part of that block read so far.
    pub meta: Vec<u8>,
}

impl IcyDemuxer {
    /// A demuxer for a stream whose `icy-metaint` is `metaint` bytes (must be > 0).
    pub fn new(metaint: usize) -> IcyDemuxer {
        IcyDemuxer {
            metaint: metaint.max(1),
            audio_left: metaint.max(1),
            meta_left: None,
            meta: Vec::new(),
        }
    }

    /// Its position in the stream.
    pub fn state(&self) -> IcyDemuxState {
        IcyDemuxState {
            metaint: self.metaint,
            audio_left: self.audio_left,
            meta_left: self.meta_left,
            meta: self.meta.clone(),
        }
    }

    /// A demuxer continuing at `state` (from [`IcyDemuxer::state`]).
    pub fn from_state(state: IcyDemuxState) -> IcyDemuxer {
        IcyDemuxer {
            metaint: state.metaint.max(1),
            audio_left: state.audio_left,
            meta_left: state.meta_left,
            meta: state.meta,
        }
    }

    /// Feeds bytes, calling `f` for every audio run and every completed metadata block, in order.
    ///
    /// Errors: [`IcyError::BadBlock`] for a non-empty block that does not start with
    /// `StreamTitle=`.
    pub fn feed<'a>(
        &mut self,
        mut input: &'a [u8],
        mut f: impl FnMut(IcyPiece<'a>),
    ) -> Result<(), IcyError> {
        while !input.is_empty() {
            match self.meta_left {
                None => {
                    let n = self.audio_left.min(input.len());
                    if n > 0 {
                        f(IcyPiece::Audio(&input[..n]));
                        input = &input[n..];
                        self.audio_left -= n;
                    }
                    if self.audio_left == 0 && !input.is_empty() {
                        let len = input[0] as usize * 16;
                        input = &input[1..];
                        if len == 0 {
                            f(IcyPiece::Metadata(Vec::new()));
                            self.audio_left = self.metaint;
                        } else {
                            self.meta_left = Some(len);
                            self.meta.clear();
                        }
                    }
                }
                Some(left) => {
                    let n = left.min(input.len());
                    self.meta.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if n == left {
                        self.meta_left = None;
                        self.audio_left = self.metaint;
                        let mut payload = std::mem::take(&mut self.meta);
                        while payload.last() == Some(&0) {
                            payload.pop();
                        }
                        if !payload.is_empty() && !payload.starts_with(b"StreamTitle=") {
                            let shown = String::from_utf8_lossy(&payload[..payload.len().min(32)]);
                            return Err(IcyError::BadBlock(shown.into_owned()));
                        }
                        f(IcyPiece::Metadata(payload));
                    } else {
                        self.meta_left = Some(left - n);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_never_reach_a_block() {
        // Found by throng-fuzz (target icy): a NUL in a source's or admin's title went into
        // the block, ending the title early for players reading it as a C string.
        let b = super::metadata_block("a\0b\r\nc\u{7f}\u{85}d\te", Some("http://x/\0y"));
        let payload = String::from_utf8(b[1..].to_vec()).unwrap();
        let payload = payload.trim_end_matches('\0');
        assert_eq!(payload, "StreamTitle='ab  cd e';StreamUrl='http://x/y';");
        assert_eq!(super::clean_title("Caf\u{e9} - It's"), "Caf\u{e9} - It's");
    }

    use super::*;

    #[test]
    fn a_demuxer_resumed_from_its_state_continues_the_stream() {
        let block = metadata_block("A - B", None);
        let mut stream = vec![7u8; 10];
        stream.extend_from_slice(&block);
        stream.extend(vec![8u8; 10]);
        stream.push(0);
        stream.extend(vec![9u8; 3]);
        for cut in 0..stream.len() {
            let mut a = IcyDemuxer::new(10);
            let mut audio = Vec::new();
            let mut titles = Vec::new();
            let mut take = |p: IcyPiece<'_>| match p {
                IcyPiece::Audio(x) => audio.extend_from_slice(x),
                IcyPiece::Metadata(m) => titles.extend(stream_title(&m)),
            };
            a.feed(&stream[..cut], &mut take).unwrap();
            let mut b = IcyDemuxer::from_state(a.state());
            b.feed(&stream[cut..], &mut take).unwrap();
            assert_eq!(audio.len(), 23, "cut at {cut}");
            assert_eq!(titles, vec!["A - B".to_string()], "cut at {cut}");
        }
    }

    #[test]
    fn block_layout() {
        let b = metadata_block("", None);
        assert_eq!(&b[..], b"\x01StreamTitle='';\0");
        let b = metadata_block("Artist - Title", None);
        assert_eq!(b[0], 2);
        assert_eq!(b.len(), 33);
        assert!(b[1..].starts_with(b"StreamTitle='Artist - Title';"));
        let long = "x".repeat(5000);
        let b = metadata_block(&long, None);
        assert_eq!(b[0], 255);
        assert_eq!(b.len(), 1 + MAX_METADATA_BYTES);
    }

    #[test]
    fn long_title_keeps_the_closing_quote_and_url() {
        let b = metadata_block(&"é".repeat(3000), Some("http://x"));
        let text = String::from_utf8_lossy(&b[1..]);
        assert!(text.trim_end_matches('\0').ends_with("';"));
        assert_eq!(
            stream_url(&b[1..]),
            None,
            "URL left out when the title fills the block"
        );
        let b = metadata_block("Short", Some("http://x"));
        assert_eq!(stream_url(&b[1..]).as_deref(), Some("http://x"));
    }

    #[test]
    fn title_extraction() {
        assert_eq!(
            stream_title(b"StreamTitle='A - B';StreamUrl='x';\0\0").as_deref(),
            Some("A - B")
        );
        assert_eq!(stream_title(b"Other='x';"), None);
    }

    fn interleave(audio: &[u8], metaint: usize, block: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, c) in audio.chunks(metaint).enumerate() {
            out.extend_from_slice(c);
            if c.len() == metaint {
                out.extend_from_slice(if i == 0 { block } else { EMPTY_BLOCK });
            }
        }
        out
    }

    #[test]
    fn demux_in_arbitrary_pieces_recovers_audio_and_blocks() {
        let audio: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let block = metadata_block("Hello", None);
        let stream = interleave(&audio, 100, &block);
        for piece in [1, 7, 100, 101, 4096] {
            let mut d = IcyDemuxer::new(100);
            let mut got = Vec::new();
            let mut metas = Vec::new();
            for c in stream.chunks(piece) {
                d.feed(c, |p| match p {
                    IcyPiece::Audio(a) => got.extend_from_slice(a),
                    IcyPiece::Metadata(m) => metas.push(m),
                })
                .unwrap();
            }
            assert_eq!(got, audio, "piece size {piece}");
            assert_eq!(metas.len(), 10);
            assert_eq!(stream_title(&metas[0]).as_deref(), Some("Hello"));
            assert!(metas[1..].iter().all(|m| m.is_empty()));
        }
    }

    #[test]
    fn bad_block_fails() {
        let mut stream = vec![0u8; 10];
        stream.push(1);
        stream.extend_from_slice(b"garbage garbage!");
        let mut d = IcyDemuxer::new(10);
        assert!(matches!(
            d.feed(&stream, |_| {}),
            Err(IcyError::BadBlock(_))
        ));
    }
}
