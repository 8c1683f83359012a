//! A player's reading of HLS playlists (RFC 8216 section 4), sans-IO: what the bench's players
//! need from a multivariant playlist (its first variant, section 4.3.4.2) and from a media
//! playlist (each segment's media sequence number, URI, `EXTINF` duration, discontinuity
//! sequence number, `EXT-X-PROGRAM-DATE-TIME` and `EXT-X-MAP`; the target duration, the
//! `EXT-X-SERVER-CONTROL` blocking-reload flag, `EXT-X-ENDLIST`), and how its URIs resolve.
//!
//! - A segment's media sequence number is `EXT-X-MEDIA-SEQUENCE` plus its place in the playlist
//!   (section 4.3.3.2, 0 when the tag is absent).
//! - Its discontinuity sequence number is `EXT-X-DISCONTINUITY-SEQUENCE` plus the
//!   `EXT-X-DISCONTINUITY` tags at or before it (section 4.3.3.3): two segments with the same
//!   number are in one timeline, so a player can tell a discontinuity between two segments it
//!   fetched even when the segments between them slid out of the window.
//! - `EXT-X-PROGRAM-DATE-TIME` applies to the segment after it (section 4.3.2.6, an ISO 8601
//!   date-time with a time zone; read as RFC 3339); one that does not parse is left out.
//! - `EXT-X-MAP` applies to every segment after it until the next one (section 4.3.2.5).
//! - Low-latency tags (`EXT-X-PART`, `EXT-X-PRELOAD-HINT`, `EXT-X-PART-INF`) and every other tag
//!   are skipped: the bench's players fetch whole segments.
//!
//! Errors ([`PlaylistError`]): a text that does not start with `#EXTM3U` (section 4.3.1.1), a
//! media playlist without `EXT-X-TARGETDURATION` (required, section 4.3.3.1), a multivariant
//! playlist whose `EXT-X-STREAM-INF` names no URI (section 4.3.4.2).

use thiserror::Error;

/// One segment of a media playlist, as a player keeps it until it has fetched it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Media sequence number (RFC 8216 section 4.3.3.2).
    pub seq: u64,
    /// Its URI as written (relative to the playlist, an absolute path or an `http://` URL).
    pub uri: String,
    /// `EXTINF` duration (µs).
    pub duration_us: u64,
    /// Discontinuity sequence number (section 4.3.3.3).
    pub discontinuity: u64,
    /// `EXT-X-DISCONTINUITY` precedes it.
    pub discontinuity_tag: bool,
    /// `EXT-X-PROGRAM-DATE-TIME` of its first sample (ms since the Unix epoch), if tagged.
    pub pdt_ms: Option<i64>,
    /// The `EXT-X-MAP` URI in force (fMP4 initialization section), if any.
    pub map: Option<String>,
}

/// A media playlist (RFC 8216 section 4.3.3 and 4.3.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MediaPlaylist {
    /// `EXT-X-TARGETDURATION` (s): no segment lasts longer, rounded (section 4.3.3.1).
    pub target_duration_s: u64,
    /// `EXT-X-MEDIA-SEQUENCE` (0 when absent).
    pub media_sequence: u64,
    /// `EXT-X-DISCONTINUITY-SEQUENCE` (0 when absent).
    pub discontinuity_sequence: u64,
    /// The segments, oldest first.
    pub segments: Vec<Listed>,
    /// `EXT-X-ENDLIST`: no segment will be added (section 4.3.3.4).
    pub ended: bool,
    /// `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES` (RFC 8216bis section 4.4.3.8).
    pub can_block_reload: bool,
}

/// What a playlist is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Playlist {
    /// A multivariant playlist: its first variant's URI (a player of the bench takes it).
    Multivariant {
        /// The first `EXT-X-STREAM-INF` URI, as written.
        variant: String,
    },
    /// A media playlist.
    Media(MediaPlaylist),
}

/// A playlist a player cannot use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PlaylistError {
    /// The text does not start with `#EXTM3U` (RFC 8216 section 4.3.1.1).
    #[error("not a playlist: no #EXTM3U first line")]
    NotAPlaylist,
    /// A media playlist without `EXT-X-TARGETDURATION` (section 4.3.3.1).
    #[error("media playlist without EXT-X-TARGETDURATION")]
    NoTargetDuration,
    /// `EXT-X-STREAM-INF` without a URI line after it (section 4.3.4.2).
    #[error("EXT-X-STREAM-INF without a URI")]
    NoVariantUri,
}

/// The value of attribute `name` in an attribute list (`URI="x",BYTERANGE="..."`, section
/// 4.2), quotes removed; `None` when absent.
fn attribute<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = list;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            let next = q[end + 1..].strip_prefix(',').unwrap_or(&q[end + 1..]);
            (&q[..end], next)
        } else {
            match after.split_once(',') {
                Some((v, n)) => (v, n),
                None => (after, ""),
            }
        };
        if key.trim() == name {
            return Some(value);
        }
        rest = next;
    }
    None
}

/// An `EXT-X-PROGRAM-DATE-TIME` value (RFC 8216 section 4.3.2.6: ISO 8601 with a time zone,
/// read as RFC 3339) in ms since the Unix epoch; `None` when it does not parse.
pub fn parse_pdt(v: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(v.trim())
        .ok()
        .map(|d| d.timestamp_millis())
}

/// Reads a playlist (see the module comment).
///
/// Errors: see [`PlaylistError`].
pub fn parse(text: &str) -> Result<Playlist, PlaylistError> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .peekable();
    // A UTF-8 byte order mark is not allowed (section 4.1), but costs nothing to pass.
    if lines.next().map(|l| l.trim_start_matches('\u{feff}')) != Some("#EXTM3U") {
        return Err(PlaylistError::NotAPlaylist);
    }
    let mut p = MediaPlaylist::default();
    let mut target: Option<u64> = None;
    let mut extinf: Option<u64> = None;
    let mut stream_inf = false;
    let mut disc_tag = false;
    let mut disc_count = 0u64;
    let mut pdt: Option<i64> = None;
    let mut map: Option<String> = None;
    let mut next_seq: Option<u64> = None;
    for l in lines {
        if let Some(tag) = l.strip_prefix('#') {
            if !tag.starts_with("EXT") {
                continue; // a comment
            }
            if let Some(v) = tag.strip_prefix("EXT-X-TARGETDURATION:") {
                target = v.trim().parse().ok();
            } else if let Some(v) = tag.strip_prefix("EXT-X-MEDIA-SEQUENCE:") {
                p.media_sequence = v.trim().parse().unwrap_or(0);
            } else if let Some(v) = tag.strip_prefix("EXT-X-DISCONTINUITY-SEQUENCE:") {
                p.discontinuity_sequence = v.trim().parse().unwrap_or(0);
            } else if tag == "EXT-X-DISCONTINUITY" {
                disc_tag = true;
            } else if let Some(v) = tag.strip_prefix("EXTINF:") {
                extinf = v
                    .split(',')
                    .next()
                    .and_then(|d| d.trim().parse::<f64>().ok())
                    .filter(|d| d.is_finite() && *d >= 0.0)
                    .map(|d| (d * 1e6).round() as u64);
            } else if let Some(v) = tag.strip_prefix("EXT-X-PROGRAM-DATE-TIME:") {
                pdt = parse_pdt(v);
            } else if let Some(v) = tag.strip_prefix("EXT-X-MAP:") {
                map = attribute(v, "URI").map(str::to_owned);
            } else if tag.starts_with("EXT-X-STREAM-INF") {
                stream_inf = true;
            } else if tag == "EXT-X-ENDLIST" {
                p.ended = true;
            } else if let Some(v) = tag.strip_prefix("EXT-X-SERVER-CONTROL:") {
                p.can_block_reload = attribute(v, "CAN-BLOCK-RELOAD") == Some("YES");
            }
            continue;
        }
        // A URI line.
        if stream_inf {
            return Ok(Playlist::Multivariant {
                variant: l.to_owned(),
            });
        }
        let Some(duration_us) = extinf.take() else {
            continue; // a URI without EXTINF is no segment (section 4.3.2.1)
        };
        if disc_tag {
            disc_count += 1;
        }
        let seq = *next_seq.get_or_insert(p.media_sequence);
        next_seq = Some(seq.saturating_add(1));
        p.segments.push(Listed {
            seq,
            uri: l.to_owned(),
            duration_us,
            discontinuity: p.discontinuity_sequence.saturating_add(disc_count),
            discontinuity_tag: std::mem::take(&mut disc_tag),
            pdt_ms: pdt.take(),
            map: map.clone(),
        });
    }
    if stream_inf {
        return Err(PlaylistError::NoVariantUri);
    }
    p.target_duration_s = target.ok_or(PlaylistError::NoTargetDuration)?;
    Ok(Playlist::Media(p))
}

/// The directory of a request path (`/hls/a.mp3/index.m3u8?s=1` → `/hls/a.mp3/`), against
/// which relative URIs resolve (RFC 8216 section 4.1, RFC 3986 section 5.2).
pub fn dir_of(path: &str) -> String {
    let p = path.split(['?', '#']).next().unwrap_or(path);
    match p.rfind('/') {
        Some(i) => p[..=i].to_owned(),
        None => "/".to_owned(),
    }
}

/// The request path of playlist URI `uri` found in a playlist whose directory is `base` (see
/// [`dir_of`]): a relative URI is appended to it, an absolute path kept, and an `http://` URL
/// gives its path (the bench's players talk to the playlist's server).
pub fn resolve(base: &str, uri: &str) -> String {
    if let Some(rest) = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))
    {
        return rest.find('/').map_or("/".into(), |i| rest[i..].to_owned());
    }
    if uri.starts_with('/') {
        uri.to_owned()
    } else {
        format!("{base}{uri}")
    }
}

/// The media playlist `path` with the blocking-reload directive `_HLS_msn=msn` added to its
/// query (RFC 8216bis section 6.2.5.1).
pub fn blocking_path(path: &str, msn: u64) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}_HLS_msn={msn}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(text: &str) -> MediaPlaylist {
        match parse(text).unwrap() {
            Playlist::Media(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn media_playlists_give_each_segment_its_numbers() {
        let m = media(
            "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:2\n\
             #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.000\n\
             #EXT-X-MEDIA-SEQUENCE:100\n#EXT-X-DISCONTINUITY-SEQUENCE:4\n\
             #EXT-X-MAP:URI=\"100.mp4\"\n\
             #EXT-X-PROGRAM-DATE-TIME:2026-11-22T20:50:04.005Z\n#EXTINF:2.005,\n100.m4s\n\
             #EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI=\"101.mp4\"\n\
             #EXT-X-PROGRAM-DATE-TIME:2026-11-22T21:50:06.010+01:00\n\
             #EXT-X-PART:DURATION=1.000,URI=\"101.0.m4s\",INDEPENDENT=YES\n\
             #EXTINF:1.995,\n101.m4s\n\
             #EXTINF:2,\n102.m4s\n\
             #EXT-X-PART:DURATION=1.000,URI=\"103.0.m4s\"\n\
             #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"103.1.m4s\"\n",
        );
        assert_eq!(m.target_duration_s, 2);
        assert!(m.can_block_reload && !m.ended);
        let s = &m.segments;
        assert_eq!(s.len(), 3, "parts are not segments");
        assert_eq!((s[0].seq, s[1].seq, s[2].seq), (100, 101, 102));
        assert_eq!((s[0].discontinuity, s[1].discontinuity), (4, 5));
        assert_eq!(s[2].discontinuity, 5);
        assert!(s[1].discontinuity_tag && !s[2].discontinuity_tag);
        assert_eq!(s[0].duration_us, 2_005_000);
        assert_eq!(s[0].pdt_ms, Some(1_795_380_604_005));
        assert_eq!(s[1].pdt_ms, Some(1_795_380_606_010), "a zone offset");
        assert_eq!(s[2].pdt_ms, None, "a date-time applies to one segment");
        assert_eq!(s[0].map.as_deref(), Some("100.mp4"));
        assert_eq!(
            s[2].map.as_deref(),
            Some("101.mp4"),
            "a map applies until the next"
        );
    }

    #[test]
    fn multivariant_playlists_give_their_first_variant() {
        let p = parse(
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH=64000\n\
             s/tok/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=128000\nhi.m3u8\n",
        );
        assert_eq!(
            p,
            Ok(Playlist::Multivariant {
                variant: "s/tok/index.m3u8".into()
            })
        );
    }

    #[test]
    fn what_is_no_playlist_is_refused() {
        assert_eq!(parse("<html>"), Err(PlaylistError::NotAPlaylist));
        assert_eq!(parse(""), Err(PlaylistError::NotAPlaylist));
        assert_eq!(
            parse("#EXTM3U\n#EXTINF:2,\n1.mp3\n"),
            Err(PlaylistError::NoTargetDuration)
        );
        assert_eq!(
            parse("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n"),
            Err(PlaylistError::NoVariantUri)
        );
        // No segment yet is a playlist all the same.
        assert!(media("#EXTM3U\n#EXT-X-TARGETDURATION:6\n")
            .segments
            .is_empty());
        // A bad date-time is left out, not an error.
        let m = media("#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PROGRAM-DATE-TIME:yesterday\n#EXTINF:6,\na.mp3\n#EXT-X-ENDLIST\n");
        assert_eq!(m.segments[0].pdt_ms, None);
        assert!(m.ended);
    }

    #[test]
    fn attributes_and_uris() {
        assert_eq!(
            attribute("URI=\"a,b.mp4\",BYTERANGE=\"10@0\"", "URI"),
            Some("a,b.mp4")
        );
        assert_eq!(attribute("BYTERANGE=\"10@0\",URI=\"x\"", "URI"), Some("x"));
        assert_eq!(
            attribute("CAN-BLOCK-RELOAD=YES,HOLD-BACK=6", "HOLD-BACK"),
            Some("6")
        );
        assert_eq!(attribute("A=1", "URI"), None);
        assert_eq!(dir_of("/hls/a.mp3/index.m3u8?s=1"), "/hls/a.mp3/");
        assert_eq!(dir_of("index.m3u8"), "/");
        assert_eq!(resolve("/hls/a.mp3/", "12.mp3"), "/hls/a.mp3/12.mp3");
        assert_eq!(resolve("/hls/a.mp3/", "/x/1.aac"), "/x/1.aac");
        assert_eq!(resolve("/b/", "http://cdn:80/y/2.aac"), "/y/2.aac");
        assert_eq!(
            blocking_path("/hls/a.mp3/index.m3u8?session=x", 12),
            "/hls/a.mp3/index.m3u8?session=x&_HLS_msn=12"
        );
        assert_eq!(blocking_path("/p.m3u8", 3), "/p.m3u8?_HLS_msn=3");
    }
}
