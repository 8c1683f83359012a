//! `[hls]` and the `hls-*` keys of `[[mount]]`: which MP3/AAC mounts are also served as
//! packed-audio HLS (RFC 8216 section 3.4), their segment target duration and window, and
//! whether playlists offer blocking playlist reload (RFC 8216bis section 6.2.5.2).
//! A mount's own keys win over `[hls]`.

use serde::{Deserialize, Serialize};

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
}

impl Default for HlsConfig {
    fn default() -> Self {
        HlsConfig {
            enabled: true,
            segment_seconds: 6,
            window: 6,
            blocking_reload: false,
        }
    }
}

/// The HLS settings in force for one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HlsSettings {
    /// Segment target duration in milliseconds.
    pub target_ms: u64,
    /// Segments listed in the playlist.
    pub window: usize,
    /// Blocking playlist reload is offered (`[hls] blocking-reload`).
    pub blocking_reload: bool,
}

/// The HLS settings of a mount from `[hls]` and its own `hls`, `hls-segment-seconds` and
/// `hls-window` keys (the mount's win); `None` when HLS is off for it.
pub fn settings(
    global: &HlsConfig,
    on: Option<bool>,
    segment_seconds: Option<u64>,
    window: Option<usize>,
) -> Option<HlsSettings> {
    if !on.unwrap_or(global.enabled) {
        return None;
    }
    let secs = segment_seconds.unwrap_or(global.segment_seconds);
    Some(HlsSettings {
        target_ms: secs.clamp(1, 30) * 1000,
        window: window.unwrap_or(global.window).clamp(3, 100),
        blocking_reload: global.blocking_reload,
    })
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
        assert_eq!(settings(&g, Some(false), None, None), None);
        assert_eq!(
            settings(&g, None, Some(6), Some(10)),
            Some(HlsSettings {
                target_ms: 6000,
                window: 10,
                blocking_reload: false,
            })
        );
        assert_eq!(
            settings(&g, None, None, None),
            Some(HlsSettings {
                target_ms: 2000,
                window: 6,
                blocking_reload: false,
            })
        );
        let off = HlsConfig {
            enabled: false,
            ..HlsConfig::default()
        };
        assert_eq!(settings(&off, None, None, None), None);
        assert!(settings(&off, Some(true), None, None).is_some());
        assert!(check_seconds("k", Some(0)).is_err());
        assert!(check_seconds("k", Some(30)).is_ok());
        assert!(check_window("k", Some(2)).is_err());
        assert!(check_window("k", None).is_ok());
    }
}
