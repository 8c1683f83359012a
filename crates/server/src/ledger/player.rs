//! A listener's player, as the reports group it (`group=agent`): the first product token of
//! its `User-Agent` (RFC 9110 §10.1.5 `product/version`), without the version, so `VLC/3.0.20
//! LibVLC/3.0.20` and `VLC/3.0.18` are both `VLC`. Browsers, whose first token is always
//! `Mozilla/5.0`, are named by the engine or browser token found later in the string.

/// Most bytes of a player name (64).
pub const MAX_PLAYER: usize = 64;

/// The player family of `agent`; `unknown` without a `User-Agent`.
pub fn player_of(agent: Option<&str>) -> String {
    let Some(agent) = agent.map(str::trim).filter(|a| !a.is_empty()) else {
        return "unknown".into();
    };
    if agent.starts_with("Mozilla/") {
        // Order matters: Edge and Opera claim Chrome, Chrome claims Safari.
        for (token, name) in [
            ("Edg/", "Edge"),
            ("OPR/", "Opera"),
            ("Firefox/", "Firefox"),
            ("Chromium/", "Chromium"),
            ("HeadlessChrome/", "Chrome"),
            ("Chrome/", "Chrome"),
            ("Safari/", "Safari"),
        ] {
            if agent.contains(token) {
                return name.into();
            }
        }
        return "Mozilla".into();
    }
    let first = agent.split_whitespace().next().unwrap_or(agent);
    let name = first.split('/').next().unwrap_or(first);
    let mut end = name.len().min(MAX_PLAYER);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    if end == 0 {
        return "unknown".into();
    }
    name[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn players_are_named_by_their_product() {
        assert_eq!(player_of(None), "unknown");
        assert_eq!(player_of(Some("  ")), "unknown");
        assert_eq!(player_of(Some("VLC/3.0.20 LibVLC/3.0.20")), "VLC");
        assert_eq!(player_of(Some("curl/8.5.0")), "curl");
        assert_eq!(player_of(Some("Lavf/60.16.100")), "Lavf");
        assert_eq!(player_of(Some("throng-bench")), "throng-bench");
        assert_eq!(
            player_of(Some("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")),
            "Chrome"
        );
        assert_eq!(
            player_of(Some(
                "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"
            )),
            "Firefox"
        );
        assert_eq!(player_of(Some(&"x".repeat(500))).len(), MAX_PLAYER);
    }
}
