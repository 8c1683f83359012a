//! The one mode value of a run: ICY listeners, HLS players, event-stream subscribers or WebRTC
//! (WHEP) viewers, chosen once from the command line by [`choose`].
//!
//! A run states its mode with `--mode`, or with the older `--whep` and `--events` flags, or by
//! its URLs (HLS playlists end `.m3u8`); plain URLs and no flag mean ICY. Two choices that
//! disagree (`--whep --events`, `--events` with an `.m3u8` URL, `--mode icy --whep`, ICY and HLS
//! URLs mixed in one run) are refused with an error naming both, never settled silently.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// What the simulated clients of a run are.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// ICY/HTTP stream listeners (Icecast's protocol): the default.
    #[default]
    Icy,
    /// HLS players: playlist polling, segment fetches, a player's buffer.
    Hls,
    /// Server-sent-event subscribers of `/api/v1/events`, timing title changes.
    Events,
    /// WebRTC viewers set up over WHEP.
    Whep,
}

impl Mode {
    /// The mode's name as `--mode` spells it (`icy`, `hls`, `events`, `whep`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Icy => "icy",
            Mode::Hls => "hls",
            Mode::Events => "events",
            Mode::Whep => "whep",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `url` names an HLS playlist (its path ends `.m3u8`).
pub fn is_hls_url(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or("");
    path.ends_with(".m3u8")
}

/// Two ways of choosing the mode that disagree.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{first} and {second} choose different modes ({first_mode} and {second_mode}); give one")]
pub struct ModeConflict {
    /// The first choice, as the user wrote it (`--whep`, `--mode icy`, `an .m3u8 URL`, ...).
    pub first: String,
    /// The mode the first choice asks for.
    pub first_mode: Mode,
    /// The second choice.
    pub second: String,
    /// The mode the second choice asks for.
    pub second_mode: Mode,
}

/// Chooses the mode of a run from `--mode` (if given), the `--whep` and `--events` flags and
/// the URLs: every choice made must agree, and when none is made the mode is ICY. A URL ending
/// `.m3u8` asks for HLS and a plain URL for ICY only when no flag chose a mode (so `--mode hls`
/// can load a playlist without the extension, and event-stream and WHEP URLs are plain), but
/// ICY and HLS URLs never mix in one run.
///
/// Errors: a [`ModeConflict`] naming the two choices that disagree.
pub fn choose(
    mode: Option<Mode>,
    whep: bool,
    events: bool,
    urls: &[String],
) -> Result<Mode, ModeConflict> {
    let mut chosen: Vec<(String, Mode)> = Vec::new();
    if let Some(m) = mode {
        chosen.push((format!("--mode {m}"), m));
    }
    if whep {
        chosen.push(("--whep".into(), Mode::Whep));
    }
    if events {
        chosen.push(("--events".into(), Mode::Events));
    }
    let hls = urls.iter().find(|u| is_hls_url(u));
    if let Some(u) = hls {
        chosen.push((format!("the .m3u8 URL {u}"), Mode::Hls));
    }
    let conflict = |(a, am): &(String, Mode), (b, bm): &(String, Mode)| ModeConflict {
        first: a.clone(),
        first_mode: *am,
        second: b.clone(),
        second_mode: *bm,
    };
    if let Some(first) = chosen.first() {
        if let Some(other) = chosen.iter().find(|c| c.1 != first.1) {
            return Err(conflict(first, other));
        }
    }
    if let (Some(h), Some(plain)) = (hls, urls.iter().find(|u| !is_hls_url(u))) {
        // Only a run of HLS players can have .m3u8 URLs (checked above), and its every URL
        // must be a playlist: an ICY listener of a playlist would read text, not audio.
        let mode_hls = chosen.iter().any(|c| c.0.starts_with("--mode"));
        if !mode_hls {
            return Err(conflict(
                &(format!("the .m3u8 URL {h}"), Mode::Hls),
                &(format!("the plain URL {plain}"), Mode::Icy),
            ));
        }
    }
    Ok(chosen.first().map_or(Mode::Icy, |c| c.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hls_urls_are_recognised() {
        assert!(is_hls_url("http://h/hls/live.mp3/index.m3u8"));
        assert!(is_hls_url("http://h/x.m3u8?session=1"));
        assert!(!is_hls_url("http://h/live.mp3"));
    }

    #[test]
    fn one_choice_decides_and_none_means_icy() {
        let icy = urls(&["http://h/live.mp3"]);
        let hls = urls(&["http://h/a/index.m3u8", "http://h/b/index.m3u8"]);
        assert_eq!(choose(None, false, false, &icy), Ok(Mode::Icy));
        assert_eq!(choose(None, false, false, &hls), Ok(Mode::Hls));
        assert_eq!(choose(None, true, false, &icy), Ok(Mode::Whep));
        assert_eq!(choose(None, false, true, &icy), Ok(Mode::Events));
        assert_eq!(
            choose(Some(Mode::Events), false, false, &icy),
            Ok(Mode::Events)
        );
        assert_eq!(choose(Some(Mode::Hls), false, false, &hls), Ok(Mode::Hls));
        // --mode hls loads playlists whatever their names.
        assert_eq!(choose(Some(Mode::Hls), false, false, &icy), Ok(Mode::Hls));
    }

    #[test]
    fn the_same_choice_twice_is_no_conflict() {
        let u = urls(&["http://h/whep/a.opus"]);
        assert_eq!(choose(Some(Mode::Whep), true, false, &u), Ok(Mode::Whep));
        assert_eq!(
            choose(Some(Mode::Events), false, true, &u),
            Ok(Mode::Events)
        );
    }

    #[test]
    fn conflicting_choices_are_refused_naming_both() {
        let plain = urls(&["http://h/live.mp3"]);
        let hls = urls(&["http://h/a/index.m3u8"]);
        let msg = |r: Result<Mode, ModeConflict>| r.unwrap_err().to_string();
        let m = msg(choose(None, true, true, &plain));
        assert!(m.contains("--whep") && m.contains("--events"), "{m}");
        let m = msg(choose(None, false, true, &hls));
        assert!(m.contains("--events") && m.contains(".m3u8 URL"), "{m}");
        let m = msg(choose(None, true, false, &hls));
        assert!(m.contains("--whep") && m.contains(".m3u8 URL"), "{m}");
        let m = msg(choose(Some(Mode::Icy), true, false, &plain));
        assert!(m.contains("--mode icy") && m.contains("--whep"), "{m}");
        let m = msg(choose(Some(Mode::Icy), false, false, &hls));
        assert!(m.contains("--mode icy") && m.contains(".m3u8"), "{m}");
        let m = msg(choose(Some(Mode::Whep), false, true, &plain));
        assert!(m.contains("--mode whep") && m.contains("--events"), "{m}");
    }

    #[test]
    fn icy_and_hls_urls_do_not_mix() {
        let mixed = urls(&["http://h/a/index.m3u8", "http://h/live.mp3"]);
        let m = choose(None, false, false, &mixed).unwrap_err().to_string();
        assert!(m.contains("index.m3u8") && m.contains("live.mp3"), "{m}");
        // Unless --mode hls says every URL is a playlist.
        assert_eq!(choose(Some(Mode::Hls), false, false, &mixed), Ok(Mode::Hls));
    }
}
