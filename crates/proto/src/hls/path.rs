//! HLS URL paths, the one place that reads them: what Throng serves under `/hls/` and what a
//! cache tier's request log line names (`cache_log.rs`).
//!
//! - `/hls/<mount>/index.m3u8`: the multivariant playlist handing a player its session (or, with
//!   `?session=<token>`, a per-session media playlist);
//! - `/hls/<mount>/s/<token>/index.m3u8`: a shared media playlist, the session token in the
//!   path so a cache keys the playlist without it (its key is the path with `/s/<token>`
//!   removed, `deploy/nginx/hls-cache.conf`) but logs it;
//! - `/hls/<mount>/<seq>.<ext>` and `/hls/<mount>/s/<token>/<seq>.<ext>`: a segment (`mp3`,
//!   `aac`, fMP4 `m4s`) or an fMP4 initialization section (`<seq>.mp4`, numbered after the
//!   first segment that uses it) or a low-latency partial segment (`<seq>.<part>.m4s`), the
//!   second as the relative URL of a shared playlist resolves.
//!
//! A token is 1 to 64 ASCII alphanumerics, `-` or `_` (a signed token is
//! `<id>-<expires>-<md5>`, `secure_link.rs`); a mount name whose last two components are `s`
//! and such a token is read as the token form.

/// Path prefix of every HLS URL.
pub const PREFIX: &str = "/hls";

/// Longest session token (characters).
pub const MAX_TOKEN: usize = 64;

/// What an HLS path names (borrowed from the path: no allocation per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `…/index.m3u8` of mount `mount`, with the token of the path form if there was one.
    Playlist {
        /// The mount name (`/live.mp3`).
        mount: &'a str,
        /// The session token of `/s/<token>/`, if the path has one.
        token: Option<&'a str>,
    },
    /// Segment `seq` with extension `ext` of mount `mount`.
    Segment {
        /// The mount name.
        mount: &'a str,
        /// The segment's media sequence number.
        seq: u64,
        /// `mp3`, `aac`, `m4s` (fMP4 segment) or `mp4` (fMP4 initialization section).
        ext: &'a str,
        /// Low-latency HLS: partial segment `part` of segment `seq` (`<seq>.<part>.m4s`).
        part: Option<u64>,
        /// The session token of `/s/<token>/`, if the path has one.
        token: Option<&'a str>,
    },
}

impl<'a> Target<'a> {
    /// The mount name.
    pub fn mount(&self) -> &'a str {
        match *self {
            Target::Playlist { mount, .. } | Target::Segment { mount, .. } => mount,
        }
    }

    /// The token carried in the path, if any.
    pub fn token(&self) -> Option<&'a str> {
        match *self {
            Target::Playlist { token, .. } | Target::Segment { token, .. } => token,
        }
    }

    /// `playlist` or `segment` (the `kind` label of `throng_hls_requests_total`).
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Playlist { .. } => "playlist",
            Target::Segment { .. } => "segment",
        }
    }
}

/// Whether `t` is a plausible session token: 1 to [`MAX_TOKEN`] ASCII alphanumerics, `-` or
/// `_`.
pub fn is_token(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TOKEN
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads an HLS path (no query); `None` when it is not one (wrong prefix, a mount name that
/// is not canonical, an unknown file name).
pub fn parse(path: &str) -> Option<Target<'_>> {
    let rest = path.strip_prefix(PREFIX)?;
    let (dir, file) = rest.rsplit_once('/')?;
    let valid = |m: &str| m.len() >= 2 && crate::mount_name::is_canonical(m);
    let (mount, token) = dir
        .rsplit_once('/')
        .filter(|(_, t)| is_token(t))
        .and_then(|(head, t)| Some((head.strip_suffix("/s")?, Some(t))))
        .filter(|(m, _)| valid(m))
        .unwrap_or((dir, None));
    if !valid(mount) {
        return None;
    }
    if file == "index.m3u8" {
        return Some(Target::Playlist { mount, token });
    }
    let digits = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let (seq, ext) = file.split_once('.')?;
    let (part, ext) = match ext.split_once('.') {
        Some((part, "m4s")) if digits(part) => (Some(part.parse().ok()?), "m4s"),
        Some(_) => return None,
        None => (None, ext),
    };
    if !matches!(ext, "mp3" | "aac" | "m4s" | "mp4") || !digits(seq) {
        return None;
    }
    Some(Target::Segment {
        mount,
        seq: seq.parse().ok()?,
        ext,
        part,
        token,
    })
}

/// The `session` parameter of a query, when it is a plausible token ([`is_token`]).
pub fn query_token(query: &str) -> Option<&str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("session=").filter(|t| is_token(t)))
}

/// The multivariant playlist path of mount `name` (`/live.mp3` → `/hls/live.mp3/index.m3u8`).
pub fn playlist_path(name: &str) -> String {
    format!("{PREFIX}{name}/index.m3u8")
}

/// The media playlist URI a multivariant playlist names for session `token`, relative to it:
/// `s/<token>/index.m3u8` (shared playlists) or `index.m3u8?session=<token>` (per session).
pub fn media_uri(token: &str, shared: bool) -> String {
    if shared {
        format!("s/{token}/index.m3u8")
    } else {
        format!("index.m3u8?session={token}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths() {
        assert_eq!(
            parse("/hls/live.mp3/index.m3u8"),
            Some(Target::Playlist {
                mount: "/live.mp3",
                token: None
            })
        );
        assert_eq!(
            parse("/hls/radio/a.aac/1700000000.aac"),
            Some(Target::Segment {
                mount: "/radio/a.aac",
                seq: 1_700_000_000,
                ext: "aac",
                part: None,
                token: None
            })
        );
        for ext in ["m4s", "mp4"] {
            assert_eq!(
                parse(&format!("/hls/live.opus/s/tok/12.{ext}")),
                Some(Target::Segment {
                    mount: "/live.opus",
                    seq: 12,
                    ext,
                    part: None,
                    token: Some("tok")
                })
            );
        }
        assert_eq!(
            parse("/hls/live.opus/s/tok/12.3.m4s"),
            Some(Target::Segment {
                mount: "/live.opus",
                seq: 12,
                ext: "m4s",
                part: Some(3),
                token: Some("tok")
            })
        );
        assert_eq!(
            parse("/hls/live.opus/12.3.mp3"),
            None,
            "parts are fMP4 only"
        );
        assert_eq!(parse("/hls/live.opus/12.x.m4s"), None);
        assert_eq!(parse("/hls/live.opus/12..m4s"), None);
        assert_eq!(parse("/hls/live.mp3/x.mp3"), None);
        assert_eq!(parse("/hls/live.mp3/1.ogg"), None);
        assert_eq!(parse("/hls/../a/index.m3u8"), None);
        assert_eq!(parse("/hls/index.m3u8"), None);
        assert_eq!(parse("/live.mp3"), None);
        assert_eq!(playlist_path("/live.mp3"), "/hls/live.mp3/index.m3u8");
    }

    #[test]
    fn token_paths() {
        let p = parse("/hls/live.mp3/s/Ab3/index.m3u8").unwrap();
        assert_eq!(
            p,
            Target::Playlist {
                mount: "/live.mp3",
                token: Some("Ab3")
            }
        );
        assert_eq!(
            (p.mount(), p.token(), p.kind()),
            ("/live.mp3", Some("Ab3"), "playlist")
        );
        let s = parse("/hls/a/b/s/tok9/17.mp3").unwrap();
        assert_eq!(
            s,
            Target::Segment {
                mount: "/a/b",
                seq: 17,
                ext: "mp3",
                part: None,
                token: Some("tok9")
            }
        );
        assert_eq!(s.kind(), "segment");
        // Not a token: the whole directory is the mount name.
        assert_eq!(
            parse("/hls/a/s/b.c/index.m3u8").unwrap().mount(),
            "/a/s/b.c"
        );
        assert_eq!(
            parse("/hls/a/x/tok/index.m3u8").unwrap().mount(),
            "/a/x/tok"
        );
        // `/hls/s/<token>/…` has no mount name left.
        assert_eq!(parse("/hls/s/tok/index.m3u8").unwrap().mount(), "/s/tok");
        assert_eq!(parse("/hls/live/s/tok/../index.m3u8"), None);
        let long = "x".repeat(65);
        assert_eq!(
            parse(&format!("/hls/a/s/{long}/index.m3u8"))
                .unwrap()
                .token(),
            None
        );
    }

    #[test]
    fn media_uris() {
        assert_eq!(media_uri("abc", true), "s/abc/index.m3u8");
        assert_eq!(media_uri("abc", false), "index.m3u8?session=abc");
        assert!(is_token("aZ09"));
        assert!(!is_token(""));
        assert!(!is_token("a b"));
        assert!(is_token("id-1700-Zp_V2-x"));
        assert_eq!(query_token("x=1&session=Ab3"), Some("Ab3"));
        assert_eq!(query_token("session=a%20b"), None);
        assert_eq!(query_token("_HLS_msn=3"), None);
    }
}
