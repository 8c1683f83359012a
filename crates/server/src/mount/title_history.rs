//! The titles a mount has played: a bounded ring of the last [`HISTORY_LEN`] titles with the
//! time each started and, when the title update carried one, an image URL for cover art. It is
//! fed at the one place titles change ([`crate::mount::live::Mount::set_title`]) and read by
//! `/api/v1/status` (`history`, newest first) for the station page's "Recently played".

use std::collections::VecDeque;

use parking_lot::Mutex;

/// How many titles a mount remembers.
pub const HISTORY_LEN: usize = 10;

/// One title as played.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Played {
    /// The title, already cleaned of control characters.
    pub title: String,
    /// When it started, in seconds since the Unix epoch.
    pub at_unix: i64,
    /// Cover art: the update's URL when it names an image (see [`artwork_url`]).
    pub artwork: Option<String>,
}

/// The ring of titles of one mount (interior mutability: shared by the mount's readers).
#[derive(Debug, Default)]
pub struct TitleHistory {
    ring: Mutex<VecDeque<Played>>,
}

/// The image URL in a title update's URL (ICY `StreamUrl`, admin `url`), if it is one: an
/// absolute `http(s)` URL whose path ends in an image extension (`.jpg`, `.jpeg`, `.png`,
/// `.webp`, `.gif`, `.avif`, `.svg`), without quotes, spaces or control characters (it goes
/// into an `<img src>` and the Media Session artwork). Anything else (a station's homepage, a
/// `javascript:` URL) is `None`.
pub fn artwork_url(url: Option<&str>) -> Option<String> {
    let u = url?.trim();
    let lower = u.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) || u.len() > 2048 {
        return None;
    }
    if u.chars()
        .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '\\'))
    {
        return None;
    }
    let path = lower.split(['?', '#']).next().unwrap_or("");
    const IMAGE: [&str; 7] = [".jpg", ".jpeg", ".png", ".webp", ".gif", ".avif", ".svg"];
    IMAGE
        .iter()
        .any(|e| path.ends_with(e))
        .then(|| u.to_owned())
}

impl TitleHistory {
    /// Records that `title` started at `at_unix` with the update's `url`. An empty title, or the
    /// same title again (a repeated update), adds nothing; the oldest entry beyond
    /// [`HISTORY_LEN`] is dropped.
    pub fn push(&self, at_unix: i64, title: &str, url: Option<&str>) {
        if title.is_empty() {
            return;
        }
        let mut ring = self.ring.lock();
        if ring.back().is_some_and(|p| p.title == title) {
            return;
        }
        if ring.len() == HISTORY_LEN {
            ring.pop_front();
        }
        ring.push_back(Played {
            title: title.to_owned(),
            at_unix,
            artwork: artwork_url(url),
        });
    }

    /// The cover art of the newest title, if it has one.
    pub fn artwork(&self) -> Option<String> {
        self.ring.lock().back().and_then(|p| p.artwork.clone())
    }

    /// The titles, newest first.
    pub fn newest_first(&self) -> Vec<Played> {
        self.ring.lock().iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_titles_newest_first_without_repeats() {
        let h = TitleHistory::default();
        h.push(1, "", None);
        assert!(h.newest_first().is_empty());
        for i in 0..(HISTORY_LEN as i64 + 3) {
            h.push(i, &format!("T{i}"), None);
            h.push(i + 100, &format!("T{i}"), None);
        }
        let got = h.newest_first();
        assert_eq!(got.len(), HISTORY_LEN);
        assert_eq!(got[0].title, format!("T{}", HISTORY_LEN + 2));
        assert_eq!(got[0].at_unix, HISTORY_LEN as i64 + 2);
        assert_eq!(got[HISTORY_LEN - 1].title, "T3");
    }

    #[test]
    fn artwork_only_from_image_urls() {
        let ok = "https://img.example/covers/a.JPG?size=300";
        assert_eq!(artwork_url(Some(ok)), Some(ok.to_owned()));
        assert_eq!(
            artwork_url(Some("http://x/a.png")),
            Some("http://x/a.png".into())
        );
        for bad in [
            None,
            Some("https://station.example/"),
            Some("javascript:alert(1)//a.png"),
            Some("ftp://x/a.png"),
            Some("https://x/a b.png"),
            Some("https://x/\"onerror=.png"),
            Some("https://x/a.png.html"),
        ] {
            assert_eq!(artwork_url(bad), None, "{bad:?}");
        }
        let h = TitleHistory::default();
        h.push(5, "A - B", Some("https://x/c.webp"));
        assert_eq!(
            h.newest_first()[0].artwork.as_deref(),
            Some("https://x/c.webp")
        );
    }
}
