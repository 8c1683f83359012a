//! `[hls]` and the `hls-*` keys of `[[mount]]`: which mounts are also served as HLS (packed
//! audio, RFC 8216 section 3.4, or fMP4: `aac-segments`), their segment target duration and
//! window, whether
//! playlists offer blocking playlist reload (RFC 8216bis section 6.2.5.2), whether media
//! playlists are shared and cacheable or per session (`playlists`), and where the cache tier's
//! request logs arrive (`cache-log-listen`) and from whom (`cache-log-from`), and the key of
//! the session tokens' MAC (`token-secret`). A mount's own keys win over `[hls]`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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
    /// The senders `cache-log-listen` accepts datagrams from: addresses or CIDR networks
    /// (IPv4-mapped IPv6 senders count as IPv4); datagrams from any other are dropped and
    /// counted (`throng_hls_cache_log_lines_total{outcome="refused"}`). Default (none): the
    /// loopback address of the listen socket's family (`127.0.0.1`, or `::1` for an IPv6
    /// socket), see [`HlsConfig::cache_log_senders`]. Issue 42, item 4.
    pub cache_log_from: Option<Vec<String>>,
    /// Key of the MAC in the session tokens Throng issues (`hls/token.rs`; at least 16
    /// characters): cache-log lines open a session only for a token in the session table or
    /// carrying a valid MAC. Set the same value on every node of a cluster (and it survives
    /// restarts); default (none): a random key drawn at each start.
    pub token_secret: Option<String>,
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
            cache_log_from: None,
            token_secret: None,
            secure_link_secret: None,
            secure_link_seconds: 86_400,
            max_sessions: 100_000,
            pending_per_address: 32,
            new_sessions_per_second: 20,
        }
    }
}

impl HlsConfig {
    /// The networks (address, prefix length in bits) `cache-log-listen` accepts datagrams
    /// from when the socket is bound to `local`: `cache-log-from` (entries that do not parse
    /// are skipped; [`check_cache_log_from`] rejects them at load), else the loopback address
    /// of `local`'s family.
    pub fn cache_log_senders(&self, local: SocketAddr) -> Vec<(IpAddr, u8)> {
        match &self.cache_log_from {
            Some(list) => list
                .iter()
                .filter_map(|c| super::cidr::parse_cidr(c))
                .collect(),
            None if local.is_ipv4() => vec![(IpAddr::V4(Ipv4Addr::LOCALHOST), 32)],
            None => vec![(IpAddr::V6(Ipv6Addr::LOCALHOST), 128)],
        }
    }

    /// Checks `cache-log-from` and `token-secret` (messages name the key).
    ///
    /// Errors: an entry of `cache-log-from` that is not an address or CIDR network, an empty
    /// `cache-log-from` list (it would refuse every sender), a `token-secret` shorter than 16
    /// characters.
    pub fn check_cache_logs(&self) -> Result<(), String> {
        check_cache_log_from(self.cache_log_from.as_deref())?;
        match &self.token_secret {
            Some(s) if s.chars().count() < 16 => {
                Err("`hls.token-secret` must be at least 16 characters".into())
            }
            _ => Ok(()),
        }
    }
}

/// Checks `[hls] cache-log-from`: every entry an address or a CIDR network, at least one.
///
/// Errors: as [`HlsConfig::check_cache_logs`], naming the key and the entry.
pub fn check_cache_log_from(list: Option<&[String]>) -> Result<(), String> {
    let Some(list) = list else { return Ok(()) };
    if list.is_empty() {
        return Err(
            "`hls.cache-log-from` is empty: list the caches' addresses or networks, \
                    or leave it out to accept the loopback address only"
                .into(),
        );
    }
    for c in list {
        if super::cidr::parse_cidr(c).is_none() {
            return Err(format!(
                "`hls.cache-log-from`: {c:?} is not an address or CIDR network"
            ));
        }
    }
    Ok(())
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

    #[test]
    fn cache_log_senders_default_to_the_loopback_of_the_socket() {
        let c = HlsConfig::default();
        let v4: SocketAddr = "0.0.0.0:5140".parse().unwrap();
        let v6: SocketAddr = "[::]:5140".parse().unwrap();
        assert_eq!(
            c.cache_log_senders(v4),
            vec![("127.0.0.1".parse().unwrap(), 32)]
        );
        assert_eq!(c.cache_log_senders(v6), vec![("::1".parse().unwrap(), 128)]);
        let listed = HlsConfig {
            cache_log_from: Some(vec!["192.0.2.7".into(), "2001:db8::/32".into()]),
            ..HlsConfig::default()
        };
        assert_eq!(
            listed.cache_log_senders(v4),
            vec![
                ("192.0.2.7".parse().unwrap(), 32),
                ("2001:db8::".parse().unwrap(), 32)
            ]
        );
        assert!(listed.check_cache_logs().is_ok());
    }

    #[test]
    fn bad_cache_log_keys_are_named() {
        let bad = |from: Option<Vec<&str>>, secret: Option<&str>| {
            HlsConfig {
                cache_log_from: from.map(|l| l.into_iter().map(str::to_owned).collect()),
                token_secret: secret.map(str::to_owned),
                ..HlsConfig::default()
            }
            .check_cache_logs()
            .unwrap_err()
        };
        let e = bad(Some(vec!["10.0.0.0/8", "cache.example"]), None);
        assert!(
            e.contains("hls.cache-log-from") && e.contains("cache.example"),
            "{e}"
        );
        assert!(bad(Some(vec!["10.0.0.0/33"]), None).contains("hls.cache-log-from"));
        assert!(bad(Some(vec![]), None).contains("is empty"));
        assert!(bad(None, Some("short")).contains("hls.token-secret"));
        assert!(HlsConfig::default().check_cache_logs().is_ok());
    }
}
