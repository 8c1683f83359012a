//! HLS playlists (RFC 8216 section 4): the master playlist naming a session's media playlist,
//! the sliding live media playlist, and a parser of media playlists for the load generator.
//!
//! Version 3 is declared: decimal EXTINF durations need it (section 4.3.1.1 and 7). Every
//! segment carries `EXT-X-PROGRAM-DATE-TIME` (section 4.3.2.6, millisecond precision, UTC), so
//! a player can tell the latency from the wall clock; fMP4 segments name their initialization
//! section with `EXT-X-MAP` (section 4.3.2.5, version 6); `EXT-X-DISCONTINUITY` (section 4.3.2.3)
//! marks a change of source, fallback or format, and `EXT-X-DISCONTINUITY-SEQUENCE` counts those
//! that slid out of the window (section 4.3.3.3).
//!
//! Blocking playlist reload (RFC 8216bis section 6.2.5.2, `_HLS_msn`): the playlist advertises
//! `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES` (section 4.4.3.8) and [`reload_decision`] says
//! whether a request asking for media sequence number `M` is answered now, held until segment
//! `M` is cut, or refused with `400`. A player using it asks for the next segment's playlist
//! right after the previous one and gets it the moment the segment exists: one playlist
//! request per segment, none wasted on a playlist that did not change.

use std::fmt::Write;

/// One segment line of a media playlist.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaylistSegment {
    /// Segment URI, relative to the playlist (e.g. `12.aac`).
    pub uri: String,
    /// Play time in seconds (written with 3 decimals).
    pub duration_secs: f64,
    /// A discontinuity precedes this segment.
    pub discontinuity: bool,
    /// Wall-clock time of the segment's first sample, in milliseconds since the Unix epoch.
    pub program_date_time_ms: Option<i64>,
    /// The URI of the fMP4 initialization section this segment needs (`EXT-X-MAP`, RFC 8216
    /// section 4.3.2.5), relative to the playlist; `None` for packed audio.
    pub map_uri: Option<String>,
    /// Its partial segments (`EXT-X-PART` before its `EXTINF`, low-latency HLS); empty when
    /// they are not listed.
    pub parts: Vec<PlaylistPart>,
}

/// One partial segment (`EXT-X-PART`, RFC 8216bis section 4.4.4.9).
#[derive(Debug, Clone, PartialEq)]
pub struct PlaylistPart {
    /// Its URI, relative to the playlist (e.g. `12.0.m4s`).
    pub uri: String,
    /// Play time in seconds (written with 3 decimals).
    pub duration_secs: f64,
    /// It starts with an independent frame (`INDEPENDENT=YES`: every audio part does).
    pub independent: bool,
}

/// The low-latency part of a media playlist (RFC 8216bis sections 4.4.3.7, 4.4.3.8, 4.4.5.3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LowLatency {
    /// `EXT-X-PART-INF:PART-TARGET`, seconds.
    pub part_target_secs: f64,
    /// The segment being cut: whether a discontinuity precedes it, its `EXT-X-MAP` URI, and the
    /// parts published so far.
    pub open_discontinuity: bool,
    /// The `EXT-X-MAP` URI of the segment being cut.
    pub open_map_uri: Option<String>,
    /// The parts of the segment being cut published so far.
    pub open_parts: Vec<PlaylistPart>,
    /// `EXT-X-PRELOAD-HINT:TYPE=PART` URI: the next part, not yet published.
    pub preload_hint: Option<String>,
}

/// A live media playlist window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MediaPlaylist {
    /// `EXT-X-TARGETDURATION`, whole seconds.
    pub target_duration: u64,
    /// `EXT-X-MEDIA-SEQUENCE`: the sequence number of the first segment listed.
    pub media_sequence: u64,
    /// `EXT-X-DISCONTINUITY-SEQUENCE`: discontinuities before the first segment listed.
    pub discontinuity_sequence: u64,
    /// The segments, oldest first.
    pub segments: Vec<PlaylistSegment>,
    /// The stream has ended for good (`EXT-X-ENDLIST`).
    pub ended: bool,
    /// The server holds requests carrying `_HLS_msn` (`EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES`,
    /// RFC 8216bis section 4.4.3.8).
    pub can_block_reload: bool,
    /// Low-latency HLS: partial segments and the preload hint (implies `can_block_reload`).
    pub low_latency: Option<LowLatency>,
}

/// What a blocking playlist reload asking for a media sequence number gets (RFC 8216bis
/// section 6.2.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Answer the current playlist now (no `_HLS_msn`, or the segment is already listed).
    Now,
    /// Hold the request until the segment is cut (at most three target durations, then `503`).
    Wait,
    /// `400 Bad Request`: the segment is more than two beyond the newest one listed.
    BadRequest,
}

/// The decision for a playlist request carrying `_HLS_msn=msn` (`None`: absent) when the newest
/// segment listed has sequence number `newest` (`None`: none cut yet). RFC 8216bis section
/// 6.2.5.2: hold "until the Playlist contains a Media Segment with Media Sequence Number of M
/// or later"; respond `400` when `M` is greater than the last listed plus two. Without partial
/// segments `_HLS_part` asks for a part of segment `M`, which exists once `M` does, so it does
/// not change the decision.
pub fn reload_decision(msn: Option<u64>, newest: Option<u64>) -> Reload {
    match (msn, newest) {
        (None, _) => Reload::Now,
        (Some(_), None) => Reload::Wait,
        (Some(m), Some(n)) if m <= n => Reload::Now,
        (Some(m), Some(n)) if m <= n.saturating_add(2) => Reload::Wait,
        _ => Reload::BadRequest,
    }
}

/// The `_HLS_msn` delivery directive of a playlist request's query (RFC 8216bis section
/// 6.2.5.1): `None` when absent or not a decimal integer.
pub fn hls_msn(query: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("_HLS_msn="))
        .and_then(|v| v.parse().ok())
}

/// Formats milliseconds since the Unix epoch as an ISO 8601 UTC date-time with milliseconds
/// (`2026-11-22T20:50:04.123Z`), as RFC 8216 section 4.3.2.6 requires (RFC 3339 profile).
pub fn iso8601_ms(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let ms = unix_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant, "chrono-compatible low-level date
    // algorithms", days_from_civil inverse).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

impl MediaPlaylist {
    /// The playlist text.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(160 + self.segments.len() * 80);
        // EXT-X-MAP outside an I-frame playlist needs version 6 (RFC 8216 section 7).
        let fmp4 = self.segments.iter().any(|s| s.map_uri.is_some())
            || self
                .low_latency
                .as_ref()
                .is_some_and(|l| l.open_map_uri.is_some());
        out.push_str(if fmp4 {
            "#EXTM3U\n#EXT-X-VERSION:6\n"
        } else {
            "#EXTM3U\n#EXT-X-VERSION:3\n"
        });
        let _ = writeln!(out, "#EXT-X-TARGETDURATION:{}", self.target_duration);
        if let Some(ll) = &self.low_latency {
            // PART-HOLD-BACK at least three part targets (RFC 8216bis section 4.4.3.8).
            let _ = writeln!(
                out,
                "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK={:.3}",
                3.0 * ll.part_target_secs
            );
            let _ = writeln!(
                out,
                "#EXT-X-PART-INF:PART-TARGET={:.3}",
                ll.part_target_secs
            );
        } else if self.can_block_reload {
            out.push_str("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES\n");
        }
        let _ = writeln!(out, "#EXT-X-MEDIA-SEQUENCE:{}", self.media_sequence);
        let _ = writeln!(
            out,
            "#EXT-X-DISCONTINUITY-SEQUENCE:{}",
            self.discontinuity_sequence
        );
        let mut map: Option<&str> = None;
        for s in &self.segments {
            if s.discontinuity {
                out.push_str("#EXT-X-DISCONTINUITY\n");
            }
            // A map applies to the segments after it until the next one (section 4.3.2.5):
            // written before the first segment and wherever the section changes.
            if let Some(uri) = s.map_uri.as_deref().filter(|&u| map != Some(u)) {
                let _ = writeln!(out, "#EXT-X-MAP:URI=\"{uri}\"");
                map = Some(uri);
            }
            if let Some(ms) = s.program_date_time_ms {
                let _ = writeln!(out, "#EXT-X-PROGRAM-DATE-TIME:{}", iso8601_ms(ms));
            }
            write_parts(&mut out, &s.parts);
            let _ = writeln!(out, "#EXTINF:{:.3},\n{}", s.duration_secs, s.uri);
        }
        if let Some(ll) = &self.low_latency {
            if !ll.open_parts.is_empty() || ll.preload_hint.is_some() {
                if ll.open_discontinuity && !self.segments.is_empty() {
                    out.push_str("#EXT-X-DISCONTINUITY\n");
                }
                if let Some(uri) = ll.open_map_uri.as_deref().filter(|&u| map != Some(u)) {
                    let _ = writeln!(out, "#EXT-X-MAP:URI=\"{uri}\"");
                }
            }
            write_parts(&mut out, &ll.open_parts);
            if let Some(uri) = &ll.preload_hint {
                let _ = writeln!(out, "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"{uri}\"");
            }
        }
        if self.ended {
            out.push_str("#EXT-X-ENDLIST\n");
        }
        out
    }
}

/// Writes one `EXT-X-PART` line per part.
fn write_parts(out: &mut String, parts: &[PlaylistPart]) {
    for p in parts {
        let _ = writeln!(
            out,
            "#EXT-X-PART:DURATION={:.3},URI=\"{}\"{}",
            p.duration_secs,
            p.uri,
            if p.independent {
                ",INDEPENDENT=YES"
            } else {
                ""
            }
        );
    }
}

/// The decision for a low-latency playlist request carrying `_HLS_msn=msn` and
/// `_HLS_part=part` (RFC 8216bis section 6.2.5.2: hold "until the Playlist contains Partial
/// Segment P of Media Segment M or later"), when the newest whole segment is `newest` and
/// segment `open` (the next one) has `open_parts` parts published. Without `_HLS_part` it is
/// [`reload_decision`]; `400` when `msn` is more than two beyond the newest segment.
pub fn reload_decision_parts(
    msn: Option<u64>,
    part: Option<u64>,
    newest: Option<u64>,
    open: u64,
    open_parts: u64,
) -> Reload {
    let (Some(m), Some(p)) = (msn, part) else {
        return reload_decision(msn, newest);
    };
    if newest.is_some_and(|n| m <= n) || m < open || (m == open && p < open_parts) {
        return Reload::Now;
    }
    match newest {
        Some(n) if m > n.saturating_add(2) => Reload::BadRequest,
        _ => Reload::Wait,
    }
}

/// The `_HLS_part` delivery directive of a playlist request's query (RFC 8216bis section
/// 6.2.5.1): `None` when absent or not a decimal integer.
pub fn hls_part(query: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("_HLS_part="))
        .and_then(|v| v.parse().ok())
}

/// A master playlist with one variant: the media playlist `uri` at `bandwidth` bits/s (RFC 8216
/// section 4.3.4.2; `BANDWIDTH` is required, `CODECS` is left out so players probe the
/// segments).
pub fn master(uri: &str, bandwidth: u64) -> String {
    format!(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH={}\n{uri}\n",
        bandwidth.max(1)
    )
}

/// What a player needs from a media or master playlist.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedPlaylist {
    /// `EXT-X-TARGETDURATION` in seconds (0 when absent).
    pub target_duration: u64,
    /// `EXT-X-MEDIA-SEQUENCE` (0 when absent).
    pub media_sequence: u64,
    /// Segments as (sequence number, URI, duration in seconds), oldest first.
    pub segments: Vec<(u64, String, f64)>,
    /// The first variant URI, when this is a master playlist.
    pub variant: Option<String>,
    /// `EXT-X-ENDLIST` was present.
    pub ended: bool,
    /// `EXT-X-SERVER-CONTROL` has `CAN-BLOCK-RELOAD=YES`: reloads may carry `_HLS_msn`.
    pub can_block_reload: bool,
}

/// Parses a playlist as a player does: tags it does not need are skipped. Errors only when the
/// text does not start with `#EXTM3U` (RFC 8216 section 4.3.1.1).
pub fn parse(text: &str) -> Option<ParsedPlaylist> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next()? != "#EXTM3U" {
        return None;
    }
    let mut p = ParsedPlaylist::default();
    let mut extinf: Option<f64> = None;
    let mut stream_inf = false;
    let mut seq = None;
    for l in lines {
        if let Some(v) = l.strip_prefix("#EXT-X-TARGETDURATION:") {
            p.target_duration = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:") {
            p.media_sequence = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("#EXTINF:") {
            extinf = v.split(',').next().and_then(|d| d.trim().parse().ok());
        } else if l.starts_with("#EXT-X-STREAM-INF") {
            stream_inf = true;
        } else if l == "#EXT-X-ENDLIST" {
            p.ended = true;
        } else if let Some(v) = l.strip_prefix("#EXT-X-SERVER-CONTROL:") {
            p.can_block_reload = v.split(',').any(|a| a.trim() == "CAN-BLOCK-RELOAD=YES");
        } else if !l.starts_with('#') {
            if stream_inf {
                p.variant.get_or_insert_with(|| l.to_owned());
                stream_inf = false;
            } else if let Some(d) = extinf.take() {
                let n = *seq.get_or_insert(p.media_sequence);
                p.segments.push((n, l.to_owned(), d));
                seq = Some(n.saturating_add(1));
            }
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_iso8601_utc() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601_ms(1_795_380_604_005), "2026-11-22T20:50:04.005Z");
        assert_eq!(iso8601_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    fn seg(uri: &str, d: f64, disc: bool, ms: i64) -> PlaylistSegment {
        PlaylistSegment {
            uri: uri.into(),
            duration_secs: d,
            discontinuity: disc,
            program_date_time_ms: Some(ms),
            map_uri: None,
            parts: Vec::new(),
        }
    }

    #[test]
    fn low_latency_lists_parts_and_the_preload_hint() {
        let part = |uri: &str| PlaylistPart {
            uri: uri.into(),
            duration_secs: 1.0,
            independent: true,
        };
        let p = MediaPlaylist {
            target_duration: 2,
            media_sequence: 10,
            segments: vec![PlaylistSegment {
                map_uri: Some("10.mp4".into()),
                parts: vec![part("10.0.m4s"), part("10.1.m4s")],
                ..seg("10.m4s", 2.0, false, 0)
            }],
            low_latency: Some(LowLatency {
                part_target_secs: 1.0,
                open_discontinuity: false,
                open_map_uri: Some("10.mp4".into()),
                open_parts: vec![part("11.0.m4s")],
                preload_hint: Some("11.1.m4s".into()),
            }),
            ..MediaPlaylist::default()
        };
        let text = p.render();
        assert!(
            text.contains(
                "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.000\n\
             #EXT-X-PART-INF:PART-TARGET=1.000\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "#EXT-X-PART:DURATION=1.000,URI=\"10.0.m4s\",INDEPENDENT=YES\n\
             #EXT-X-PART:DURATION=1.000,URI=\"10.1.m4s\",INDEPENDENT=YES\n\
             #EXTINF:2.000,\n10.m4s\n\
             #EXT-X-PART:DURATION=1.000,URI=\"11.0.m4s\",INDEPENDENT=YES\n\
             #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"11.1.m4s\"\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("#EXT-X-MAP").count(), 1, "{text}");
        let parsed = parse(&text).unwrap();
        assert!(parsed.can_block_reload);
        assert_eq!(parsed.segments.len(), 1, "parts are not segments");
    }

    #[test]
    fn blocking_reload_with_parts() {
        use Reload::*;
        // Newest whole segment 10, segment 11 open with 2 parts.
        let d = |m, p| reload_decision_parts(Some(m), p, Some(10), 11, 2);
        assert_eq!(d(10, Some(5)), Now, "a whole segment has all its parts");
        assert_eq!(d(11, Some(1)), Now);
        assert_eq!(d(11, Some(2)), Wait);
        assert_eq!(d(12, Some(0)), Wait);
        assert_eq!(d(13, None), BadRequest);
        assert_eq!(d(13, Some(0)), BadRequest);
        assert_eq!(d(11, None), Wait);
        assert_eq!(reload_decision_parts(None, Some(3), Some(10), 11, 0), Now);
        assert_eq!(reload_decision_parts(Some(0), Some(0), None, 0, 0), Wait);
        assert_eq!(reload_decision_parts(Some(0), Some(0), None, 0, 1), Now);
        assert_eq!(hls_part("_HLS_msn=3&_HLS_part=2"), Some(2));
        assert_eq!(hls_part("_HLS_msn=3"), None);
    }

    #[test]
    fn media_playlist_layout() {
        let p = MediaPlaylist {
            target_duration: 4,
            media_sequence: 7,
            discontinuity_sequence: 1,
            segments: vec![
                seg("7.mp3", 4.0228, false, 0),
                seg("8.aac", 2.5, true, 4_023),
            ],
            ended: false,
            can_block_reload: false,
            low_latency: None,
        };
        assert_eq!(
            p.render(),
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:7\n\
             #EXT-X-DISCONTINUITY-SEQUENCE:1\n\
             #EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:00:00.000Z\n#EXTINF:4.023,\n7.mp3\n\
             #EXT-X-DISCONTINUITY\n#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:00:04.023Z\n\
             #EXTINF:2.500,\n8.aac\n"
        );
        let parsed = parse(&p.render()).unwrap();
        assert_eq!(parsed.target_duration, 4);
        assert_eq!(
            parsed.segments,
            vec![(7, "7.mp3".into(), 4.023), (8, "8.aac".into(), 2.5)]
        );
        assert!(!parsed.ended);
    }

    #[test]
    fn fmp4_segments_name_their_map_once_per_change() {
        let fmp4 = |uri: &str, map: &str, disc| PlaylistSegment {
            map_uri: Some(map.into()),
            ..seg(uri, 2.0, disc, 0)
        };
        let p = MediaPlaylist {
            target_duration: 2,
            media_sequence: 10,
            segments: vec![
                fmp4("10.m4s", "9.mp4", false),
                fmp4("11.m4s", "9.mp4", false),
                fmp4("12.m4s", "12.mp4", true),
            ],
            ..MediaPlaylist::default()
        };
        let text = p.render();
        assert!(text.starts_with("#EXTM3U\n#EXT-X-VERSION:6\n"), "{text}");
        assert_eq!(text.matches("#EXT-X-MAP:").count(), 2, "{text}");
        assert!(text.contains(
            "#EXT-X-MAP:URI=\"9.mp4\"\n#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:00:00.000Z\n\
             #EXTINF:2.000,\n10.m4s\n#EXT-X-PROGRAM"
        ));
        assert!(text.contains("#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI=\"12.mp4\"\n"));
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.segments.len(), 3);
        assert_eq!(parsed.segments[2].1, "12.m4s");
    }

    #[test]
    fn master_names_the_session_playlist() {
        let m = master("index.m3u8?session=abc", 128_000);
        let p = parse(&m).unwrap();
        assert_eq!(p.variant.as_deref(), Some("index.m3u8?session=abc"));
        assert!(p.segments.is_empty());
        assert!(m.contains("BANDWIDTH=128000"));
    }

    #[test]
    fn parse_needs_extm3u_and_ends() {
        assert!(parse("#EXTINF:1,\na.aac\n").is_none());
        let p = parse("#EXTM3U\n#EXTINF:1.5,\na.aac\n#EXT-X-ENDLIST\n").unwrap();
        assert!(p.ended);
        assert_eq!(p.segments, vec![(0, "a.aac".into(), 1.5)]);
    }

    #[test]
    fn server_control_is_advertised_and_parsed() {
        let p = MediaPlaylist {
            target_duration: 6,
            media_sequence: 3,
            can_block_reload: true,
            ..MediaPlaylist::default()
        };
        let text = p.render();
        assert!(text.starts_with(
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n\
             #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES\n#EXT-X-MEDIA-SEQUENCE:3\n"
        ));
        assert!(parse(&text).unwrap().can_block_reload);
        let p =
            parse("#EXTM3U\n#EXT-X-SERVER-CONTROL:HOLD-BACK=12,CAN-BLOCK-RELOAD=YES\n").unwrap();
        assert!(p.can_block_reload);
        assert!(
            !parse("#EXTM3U\n#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=NO\n")
                .unwrap()
                .can_block_reload
        );
    }

    #[test]
    fn blocking_reload_decisions() {
        assert_eq!(reload_decision(None, None), Reload::Now);
        assert_eq!(reload_decision(None, Some(7)), Reload::Now);
        assert_eq!(reload_decision(Some(5), Some(7)), Reload::Now);
        assert_eq!(reload_decision(Some(7), Some(7)), Reload::Now);
        assert_eq!(reload_decision(Some(8), Some(7)), Reload::Wait);
        assert_eq!(reload_decision(Some(9), Some(7)), Reload::Wait);
        assert_eq!(reload_decision(Some(10), Some(7)), Reload::BadRequest);
        assert_eq!(
            reload_decision(Some(u64::MAX), Some(u64::MAX - 1)),
            Reload::Wait
        );
        assert_eq!(reload_decision(Some(1), None), Reload::Wait);
    }

    #[test]
    fn msn_directive() {
        assert_eq!(hls_msn("session=abc&_HLS_msn=42"), Some(42));
        assert_eq!(hls_msn("_HLS_msn=7&_HLS_part=1"), Some(7));
        assert_eq!(hls_msn("session=abc"), None);
        assert_eq!(hls_msn("_HLS_msn=x"), None);
        assert_eq!(hls_msn("_HLS_msn=-1"), None);
    }
}
