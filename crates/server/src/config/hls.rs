//! `[hls]` and the `hls-*` keys of `[[mount]]`: which mounts are also served as HLS (packed
//! audio, RFC 8216 section 3.4, or fMP4: `aac-segments`), their segment target duration and
//! window, whether
//! playlists offer blocking playlist reload (RFC 8216bis section 6.2.5.2), whether media
//! playlists are shared and cacheable or per session (`playlists`), and where the cache tier's
//! request logs arrive (`cache-log-listen`). A mount's own keys win over `[hls]`.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// How players are handed their media playlist (`[hls] playlists`, a mount's `hls-playlists`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlaylistMode {
    /// One media playlist per mount, the same bytes for every player, at
    /// `/hls/<mount>/s/<token>/index.m3u8` with relative segment URLs: a cache keys it without
    /// the token and keeps it at most half a target duration (`Cache-Control: public,
    /// max-age=…`), and counts players from its logs (the default).
    #[default]
    Shared,
    /// Each session's media playlist at `/hls/<mount>/index.m3u8?session=<token>`, never kept
    /// by a cache (`Cache-Control: private, max-age=1`): every reload reaches Throng, which
    /// counts sessions from its own requests. For a server with no cache in front only.
    PerSession,
}

impl PlaylistMode {
    /// The name as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PlaylistMode::Shared => "shared",
            PlaylistMode::PerSession => "per-session",
        }
    }
}

/// The container of an AAC mount's segments (`[hls] aac-segments`, a mount's
/// `hls-aac-segments`). MP3 mounts are always packed audio and Ogg/Opus and Ogg/FLAC mounts
/// always fMP4 (packed audio carries neither, RFC 8216 section 3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AacSegments {
    /// ADTS frames after an ID3 tag (`.aac`, RFC 8216 section 3.4): every HLS player, Safari's
    /// oldest included, plays it (the default).
    #[default]
    Packed,
    /// Fragmented MP4 (CMAF, `.m4s` after an `EXT-X-MAP` initialization section): the
    /// container of low-latency HLS parts and of most CDN packagers; titles travel as ID3 in
    /// `emsg`.
    Fmp4,
}

/// `[hls]`: the defaults for every MP3/AAC mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct HlsConfig {
    /// Serve MP3 and AAC mounts as HLS too (default true).
    pub enabled: bool,
    /// Segment target duration in seconds (default 6, as Apple's HLS Authoring Specification
    /// 7.5 "Target durations SHOULD be 6 seconds"; 1..=30).
    pub segment_seconds: u64,
    /// Segments listed in a media playlist (default 6; 3..=100).
    pub window: usize,
    /// Advertise `CAN-BLOCK-RELOAD=YES` and hold reloads carrying `_HLS_msn` until the segment
    /// is cut (default false: players that use it, hls.js among them, all wake at each segment
    /// cut and cost the server more than timer reloads, docs/BENCHMARKS.md); off, `_HLS_msn` is
    /// ignored and the playlist answered at once.
    pub blocking_reload: bool,
    /// Media playlists shared and cacheable, or per session (default `shared`).
    pub playlists: PlaylistMode,
    /// AAC mounts' segments: packed audio or fMP4 (default `packed`).
    pub aac_segments: AacSegments,
    /// Low-latency HLS (RFC 8216bis): partial segments of about [`PART_TARGET_MS`] listed as
    /// `EXT-X-PART` with an `EXT-X-PRELOAD-HINT`, and blocking playlist reload with `_HLS_msn`
    /// and `_HLS_part` (so `blocking-reload` is on for such a mount). fMP4 segments only (Ogg/Opus,
    /// Ogg/FLAC, AAC with `aac-segments = "fmp4"`); default false.
    pub low_latency: bool,
    /// Where the cache tier's request logs arrive as UDP syslog (nginx
    /// `access_log syslog:server=ADDR:PORT`, the `throng_hls` format of
    /// `deploy/nginx/hls-cache.conf`); none by default.
    pub cache_log_listen: Option<SocketAddr>,
    /// Sign session tokens with this secret (nginx `secure_link` compatible,
    /// `throng_proto::hls::secure_link`): only signed, unexpired tokens open playlists and
    /// segments, at the cache and at Throng; none by default.
    pub secure_link_secret: Option<String>,
    /// How long a signed token stays valid, in seconds (default 86400; 60..=31536000).
    pub secure_link_seconds: u64,
    /// Most HLS sessions held at once, listening or not (default 100000; at least 1): at the
    /// bound a new session evicts the oldest that never fetched a segment, and is refused
    /// (`503`) when every session is listening (`hls/admission.rs`).
    pub max_sessions: usize,
    /// Most sessions from one address (one IPv6 /64) that have not fetched a segment yet
    /// (default 32; at least 1): more get `503`. Sessions that fetch audio are not capped per
    /// address (thousands of listeners share a carrier's address), only by `max-listeners`.
    pub pending_per_address: u32,
    /// New sessions one address (one IPv6 /64) may open per second, in bursts of as many
    /// (default 20; at least 1): more get `503` with `Retry-After: 1`.
    pub new_sessions_per_second: u32,
}

impl Default for HlsConfig {
    fn default() -> Self {
        HlsConfig {
            enabled: true,
            segment_seconds: 6,
            window: 6,
            blocking_reload: false,
            playlists: PlaylistMode::Shared,
            aac_segments: AacSegments::Packed,
            low_latency: false,
            cache_log_listen: None,
            secure_link_secret: None,
            secure_link_seconds: 86_400,
            max_sessions: 100_000,
            pending_per_address: 32,
            new_sessions_per_second: 20,
        }
    }
}

/// The part target of low-latency HLS, in milliseconds: parts of about a second, as issue 24
/// asks (Apple's HLS Authoring Specification suggests 1 s or less for audio).
pub const PART_TARGET_MS: u64 = 1000;

/// The HLS settings in force for one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HlsSettings {
    /// Segment target duration in milliseconds.
    pub target_ms: u64,
    /// Segments listed in the playlist.
    pub window: usize,
    /// Blocking playlist reload is offered (`[hls] blocking-reload`).
    pub blocking_reload: bool,
    /// Shared or per-session media playlists (`[hls] playlists`, `hls-playlists`).
    pub playlists: PlaylistMode,
    /// The container of AAC segments (`[hls] aac-segments`, `hls-aac-segments`).
    pub aac_segments: AacSegments,
    /// Low-latency HLS parts (`[hls] low-latency`, `hls-low-latency`; fMP4 only).
    pub low_latency: bool,
}

/// A mount's own HLS keys (`hls`, `hls-segment-seconds`, `hls-window`, `hls-playlists`);
/// `None`: `[hls]` decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountHls {
    /// `hls`: HLS on or off for the mount.
    pub on: Option<bool>,
    /// `hls-segment-seconds`.
    pub segment_seconds: Option<u64>,
    /// `hls-window`.
    pub window: Option<usize>,
    /// `hls-playlists`.
    pub playlists: Option<PlaylistMode>,
    /// `hls-aac-segments`.
    pub aac_segments: Option<AacSegments>,
    /// `hls-low-latency`.
    pub low_latency: Option<bool>,
}

/// The HLS settings of a mount from `[hls]` and its own keys (the mount's win); `None` when
/// HLS is off for it.
pub fn settings(global: &HlsConfig, own: MountHls) -> Option<HlsSettings> {
    let MountHls {
        on,
        segment_seconds,
        window,
        playlists,
        aac_segments,
        low_latency,
    } = own;
    if !on.unwrap_or(global.enabled) {
        return None;
    }
    let secs = segment_seconds.unwrap_or(global.segment_seconds);
    let low_latency = low_latency.unwrap_or(global.low_latency);
    Some(HlsSettings {
        target_ms: secs.clamp(1, 30) * 1000,
        window: window.unwrap_or(global.window).clamp(3, 100),
        blocking_reload: global.blocking_reload || low_latency,
        playlists: playlists.unwrap_or(global.playlists),
        aac_segments: aac_segments.unwrap_or(global.aac_segments),
        low_latency,
    })
}

/// Checks the signing keys: a secret needs shared playlists (segments are reached under the
/// signed `/s/<token>/` path only then), and a validity of 60 s to a year. `what` names the
/// mount (or `[hls]`) in the message.
pub fn check_secure_link(
    what: &str,
    secret: Option<&str>,
    playlists: PlaylistMode,
    seconds: u64,
) -> Result<(), String> {
    match secret {
        Some("") => Err(format!("{what}: the secure-link secret is empty")),
        Some(_) if playlists == PlaylistMode::PerSession => Err(format!(
            "{what}: a secure-link secret needs playlists = \"shared\""
        )),
        Some(_) if !(60..=31_536_000).contains(&seconds) => {
            Err("`hls.secure-link-seconds` must be 60..=31536000".into())
        }
        _ => Ok(()),
    }
}

/// Checks a segment duration (`key` names it in the message): 1..=30 seconds.
pub fn check_seconds(key: &str, v: Option<u64>) -> Result<(), String> {
    match v {
        Some(s) if !(1..=30).contains(&s) => Err(format!("`{key}` must be 1..=30")),
        _ => Ok(()),
    }
}

/// Checks a playlist window (`key` names it in the message): 3..=100 segments.
pub fn check_window(key: &str, v: Option<usize>) -> Result<(), String> {
    match v {
        Some(w) if !(3..=100).contains(&w) => Err(format!("`{key}` must be 3..=100")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_keys_override_the_section() {
        let g = HlsConfig {
            segment_seconds: 2,
            ..HlsConfig::default()
        };
        let own = |on, secs, window, playlists| MountHls {
            on,
            segment_seconds: secs,
            window,
            playlists,
            aac_segments: None,
            low_latency: None,
        };
        assert_eq!(settings(&g, own(Some(false), None, None, None)), None);
        assert_eq!(
            settings(
                &g,
                own(None, Some(6), Some(10), Some(PlaylistMode::PerSession))
            ),
            Some(HlsSettings {
                target_ms: 6000,
                window: 10,
                blocking_reload: false,
                playlists: PlaylistMode::PerSession,
                aac_segments: AacSegments::Packed,
                low_latency: false,
            })
        );
        assert_eq!(
            settings(&g, MountHls::default()),
            Some(HlsSettings {
                target_ms: 2000,
                window: 6,
                blocking_reload: false,
                playlists: PlaylistMode::Shared,
                aac_segments: AacSegments::Packed,
                low_latency: false,
            })
        );
        let off = HlsConfig {
            enabled: false,
            ..HlsConfig::default()
        };
        assert_eq!(settings(&off, MountHls::default()), None);
        assert!(settings(&off, own(Some(true), None, None, None)).is_some());
        let ll = MountHls {
            low_latency: Some(true),
            ..MountHls::default()
        };
        let s = settings(&g, ll).unwrap();
        assert!(
            s.low_latency && s.blocking_reload,
            "low latency blocks reloads"
        );
        assert!(check_seconds("k", Some(0)).is_err());
        assert!(check_seconds("k", Some(30)).is_ok());
        assert!(check_window("k", Some(2)).is_err());
        assert!(check_window("k", None).is_ok());
    }
}
