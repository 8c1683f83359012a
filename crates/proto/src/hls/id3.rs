//! The ID3v2.4 tag opening each packed-audio segment.
//!
//! RFC 8216 section 3.4: "Each Packed Audio Segment MUST signal the timestamp of its first
//! sample with an ID3 Private frame (PRIV) tag at the beginning of the segment. The ID3 PRIV
//! owner identifier MUST be `com.apple.streaming.transportStreamTimestamp`. The ID3 payload MUST
//! be a 33-bit MPEG-2 Program Elementary Stream timestamp expressed as a big-endian eight-octet
//! number, with the upper 31 bits set to zero." Titles go in the same tag as `TIT2` (title) and
//! `TPE1` (artist) text frames (ID3v2.4.0 "native frames" section 4.2), UTF-8 (encoding 3), so
//! players raise them as timed metadata (Apple "Timed Metadata for HTTP Live Streaming").

/// Owner identifier of the timestamp PRIV frame (RFC 8216 section 3.4).
pub const TIMESTAMP_OWNER: &str = "com.apple.streaming.transportStreamTimestamp";

/// The 90 kHz clock of MPEG-2 timestamps wraps at 2^33 ticks (ISO/IEC 13818-1 PTS).
pub const PTS_WRAP: u64 = 1 << 33;

/// The 33-bit 90 kHz timestamp of a sample: `base_90k` (the timestamp of sample 0 of the run)
/// plus `samples` at `sample_rate` Hz, rounded down, modulo 2^33. A `sample_rate` of 0 gives
/// `base_90k`.
pub fn pts_90k(base_90k: u64, samples: u64, sample_rate: u32) -> u64 {
    if sample_rate == 0 {
        return base_90k % PTS_WRAP;
    }
    let ticks = (samples as u128 * 90_000 / sample_rate as u128) as u64;
    (base_90k + ticks) % PTS_WRAP
}

/// Encodes `n` (below 2^28) as an ID3v2 synchsafe integer: 4 bytes of 7 bits each.
fn synchsafe(n: u32) -> [u8; 4] {
    [
        ((n >> 21) & 0x7F) as u8,
        ((n >> 14) & 0x7F) as u8,
        ((n >> 7) & 0x7F) as u8,
        (n & 0x7F) as u8,
    ]
}

/// Appends one ID3v2.4 frame (4-byte id, synchsafe size, no flags) to `out`.
fn frame(out: &mut Vec<u8>, id: &[u8; 4], body: &[u8]) {
    out.extend_from_slice(id);
    out.extend_from_slice(&synchsafe(body.len() as u32));
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(body);
}

/// Appends a UTF-8 text frame (`TIT2`, `TPE1`): encoding byte 3, the text, a NUL terminator.
fn text_frame(out: &mut Vec<u8>, id: &[u8; 4], text: &str) {
    let mut body = Vec::with_capacity(text.len() + 2);
    body.push(3);
    body.extend_from_slice(text.as_bytes());
    body.push(0);
    frame(out, id, &body);
}

/// Splits a stream title into (artist, title) at the first `" - "`, as Icecast titles are
/// `Artist - Title`; `None` when there is no separator or a side is empty.
pub fn split_artist(title: &str) -> Option<(&str, &str)> {
    let (a, t) = title.split_once(" - ")?;
    let (a, t) = (a.trim(), t.trim());
    (!a.is_empty() && !t.is_empty()).then_some((a, t))
}

/// The ID3v2.4 tag for a segment whose first sample has timestamp `pts_90k` (taken modulo
/// 2^33): the PRIV timestamp frame, then, when `title` is given and not empty, `TIT2` (and
/// `TPE1` when the title reads `Artist - Title`, see [`split_artist`]). Titles longer than 64 KiB
/// are cut at a character boundary.
pub fn segment_tag(pts_90k: u64, title: Option<&str>) -> Vec<u8> {
    let mut frames = Vec::with_capacity(128);
    let mut priv_body = Vec::with_capacity(TIMESTAMP_OWNER.len() + 9);
    priv_body.extend_from_slice(TIMESTAMP_OWNER.as_bytes());
    priv_body.push(0);
    priv_body.extend_from_slice(&(pts_90k % PTS_WRAP).to_be_bytes());
    frame(&mut frames, b"PRIV", &priv_body);
    title_frames(&mut frames, title);
    wrap_tag(frames)
}

/// The ID3v2.4 tag of a title alone (`TIT2`, and `TPE1` for `Artist - Title`), the timed
/// metadata of an fMP4 segment's `emsg` (`fmp4.rs`), where the timestamp is the box's.
pub fn title_tag(title: &str) -> Vec<u8> {
    let mut frames = Vec::with_capacity(64);
    title_frames(&mut frames, Some(title));
    wrap_tag(frames)
}

/// Appends the title frames of `title` (none when absent or empty), cut at 64 KiB.
fn title_frames(frames: &mut Vec<u8>, title: Option<&str>) {
    if let Some(title) = title.filter(|t| !t.is_empty()) {
        let mut end = title.len().min(65_536);
        while !title.is_char_boundary(end) {
            end -= 1;
        }
        let title = &title[..end];
        match split_artist(title) {
            Some((artist, song)) => {
                text_frame(frames, b"TIT2", song);
                text_frame(frames, b"TPE1", artist);
            }
            None => text_frame(frames, b"TIT2", title),
        }
    }
}

/// The tag header (version 2.4, no flags) followed by `frames`.
fn wrap_tag(frames: Vec<u8>) -> Vec<u8> {
    let mut tag = Vec::with_capacity(10 + frames.len());
    tag.extend_from_slice(b"ID3\x04\x00\x00");
    tag.extend_from_slice(&synchsafe(frames.len() as u32));
    tag.extend_from_slice(&frames);
    tag
}

/// The byte multiple MP3 segment audio is padded to (see [`mp3_padding`]): ffmpeg's MP3
/// demuxer reads its input in chunks of this many bytes (`MP3_PACKET_SIZE`, `mp3dec.c`).
pub const MP3_ALIGN: usize = 1024;

/// How many zero bytes to put between a segment's ID3 tag and its `audio_len` bytes of MP3
/// frames so that the audio fills a whole number of [`MP3_ALIGN`] chunks (0 to 1023).
///
/// Why: ffmpeg's HLS demuxer (`hls.c`, `intercept_id3`) strips a segment's ID3 tag and
/// applies its PRIV timestamp when it *reads* the segment's first bytes, and dates every frame
/// it *outputs* afterwards from it; its MP3 demuxer reads in 1024-byte chunks and parses frames
/// out of them, so the frames of the previous segment still in the chunk that straddles the
/// boundary are dated from the new timestamp. That count varies with where the boundary falls
/// in a chunk, and when it shrinks from one boundary to the next the frames overlap: "non
/// monotonically increasing dts" (issue 24, item 6), whatever the rounding of sample-exact
/// timestamps. With each segment's audio a whole number of chunks the count is the same at
/// every boundary and the timestamps stay exact. Zeros hold no frame sync (`0xFFE`): ffmpeg's
/// MP3 parser and hls.js's MP3 demuxer skip them silently before the first frame (an ID3 tag
/// of padding after the frames instead made ffmpeg's decoder report "Header missing", and
/// zeros after the frames are carried by hls.js into the next segment, before its tag).
pub fn mp3_padding(audio_len: usize) -> usize {
    (MP3_ALIGN - audio_len % MP3_ALIGN) % MP3_ALIGN
}

/// What [`parse_tag`] finds in a tag: the PRIV timestamp and the text frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedTag {
    /// Length of the whole tag in bytes (header included).
    pub len: usize,
    /// The `transportStreamTimestamp` PRIV value, if present.
    pub pts_90k: Option<u64>,
    /// `TIT2`, if present.
    pub title: Option<String>,
    /// `TPE1`, if present.
    pub artist: Option<String>,
}

fn read_synchsafe(b: &[u8]) -> usize {
    b.iter()
        .take(4)
        .fold(0usize, |n, &x| (n << 7) | (x & 0x7F) as usize)
}

/// Reads an ID3v2.4 tag at the start of `b` as [`segment_tag`] writes it (for tests and the
/// load generator); `None` when `b` does not start with a whole `ID3` tag.
pub fn parse_tag(b: &[u8]) -> Option<ParsedTag> {
    if b.len() < 10 || &b[..3] != b"ID3" {
        return None;
    }
    let size = read_synchsafe(&b[6..10]);
    let end = 10 + size;
    if b.len() < end {
        return None;
    }
    let mut out = ParsedTag {
        len: end,
        ..ParsedTag::default()
    };
    let mut at = 10;
    while at + 10 <= end {
        let id = &b[at..at + 4];
        let fsize = read_synchsafe(&b[at + 4..at + 8]);
        let body = b.get(at + 10..at + 10 + fsize)?;
        match id {
            b"PRIV" => {
                let owner_end = body.iter().position(|&c| c == 0)?;
                if &body[..owner_end] == TIMESTAMP_OWNER.as_bytes() {
                    let v: [u8; 8] = body.get(owner_end + 1..owner_end + 9)?.try_into().ok()?;
                    out.pts_90k = Some(u64::from_be_bytes(v));
                }
            }
            b"TIT2" | b"TPE1" if !body.is_empty() => {
                let text = String::from_utf8_lossy(&body[1..])
                    .trim_end_matches('\0')
                    .to_owned();
                if id == b"TIT2" {
                    out.title = Some(text);
                } else {
                    out.artist = Some(text);
                }
            }
            [0, 0, 0, 0] => break,
            _ => {}
        }
        at += 10 + fsize;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mp3_padding_fills_whole_chunks() {
        assert_eq!(mp3_padding(0), 0);
        assert_eq!(mp3_padding(2048), 0);
        assert_eq!(mp3_padding(1023), 1);
        assert_eq!(mp3_padding(1025), 1023);
        for audio in [1, 500, 1014, 48_213] {
            assert_eq!((audio + mp3_padding(audio)) % MP3_ALIGN, 0, "{audio}");
        }
    }

    #[test]
    fn priv_frame_is_apple_layout() {
        let tag = segment_tag(0x1_2345_6789, None);
        // header: ID3 v2.4.0, no flags, synchsafe size of one PRIV frame
        let priv_len = TIMESTAMP_OWNER.len() + 1 + 8;
        assert_eq!(&tag[..6], b"ID3\x04\x00\x00");
        assert_eq!(read_synchsafe(&tag[6..10]), 10 + priv_len);
        assert_eq!(&tag[10..14], b"PRIV");
        assert_eq!(read_synchsafe(&tag[14..18]), priv_len);
        let body = &tag[20..];
        assert_eq!(&body[..TIMESTAMP_OWNER.len()], TIMESTAMP_OWNER.as_bytes());
        assert_eq!(body[TIMESTAMP_OWNER.len()], 0);
        assert_eq!(
            &body[TIMESTAMP_OWNER.len() + 1..],
            &[0, 0, 0, 1, 0x23, 0x45, 0x67, 0x89]
        );
        assert_eq!(tag.len(), 10 + 10 + priv_len);
    }

    #[test]
    fn timestamp_wraps_at_33_bits() {
        let t = parse_tag(&segment_tag(PTS_WRAP + 5, None)).unwrap();
        assert_eq!(t.pts_90k, Some(5));
        assert_eq!(pts_90k(PTS_WRAP - 1, 1, 90_000), 0);
    }

    #[test]
    fn pts_from_sample_count() {
        // 1000 MP3 frames of 1152 samples at 44.1 kHz = 26.122448... s = 2351020.4 ticks
        assert_eq!(pts_90k(0, 1_152_000, 44_100), 2_351_020);
        // 48 kHz AAC: 1024 samples = 1920 ticks exactly
        assert_eq!(pts_90k(10, 1024, 48_000), 1930);
        assert_eq!(pts_90k(7, 1024, 0), 7);
    }

    #[test]
    fn title_and_artist_frames() {
        let tag = segment_tag(42, Some("Daft Punk - Aerodynamic"));
        let t = parse_tag(&tag).unwrap();
        assert_eq!(t.len, tag.len());
        assert_eq!(t.pts_90k, Some(42));
        assert_eq!(t.title.as_deref(), Some("Aerodynamic"));
        assert_eq!(t.artist.as_deref(), Some("Daft Punk"));
        let t = parse_tag(&segment_tag(1, Some("Station jingle – été"))).unwrap();
        assert_eq!(t.title.as_deref(), Some("Station jingle – été"));
        assert_eq!(t.artist, None);
        assert_eq!(parse_tag(&segment_tag(1, Some(""))).unwrap().title, None);
    }

    #[test]
    fn long_titles_keep_synchsafe_sizes() {
        let long = "é".repeat(40_000);
        let tag = segment_tag(1, Some(&long));
        assert!(tag[6..10].iter().all(|b| b & 0x80 == 0));
        let t = parse_tag(&tag).unwrap();
        assert_eq!(t.title.unwrap().len(), 65_536);
    }

    #[test]
    fn split_artist_needs_both_sides() {
        assert_eq!(split_artist("A - B - C"), Some(("A", "B - C")));
        assert_eq!(split_artist(" - B"), None);
        assert_eq!(split_artist("Just a title"), None);
    }

    #[test]
    fn parse_rejects_truncated() {
        let tag = segment_tag(1, Some("x"));
        assert!(parse_tag(&tag[..tag.len() - 1]).is_none());
        assert!(parse_tag(b"ID2xxxxxxxxx").is_none());
    }
}
