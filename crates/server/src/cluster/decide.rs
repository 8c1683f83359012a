//! The cluster's pure decisions, with `now` passed in: an edge's room, which edge a listener
//! is sent to, when an edge is dropped, whether to redirect, and the `Location` of a redirect.

use std::time::{Duration, Instant};

use crate::config::cluster::RedirectMode;

/// What the origin knows of one edge's load, for [`pick`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeLoad {
    /// Listeners the edge advertises room for (listeners).
    pub capacity: u64,
    /// Listeners at its last report (listeners).
    pub listeners: u64,
    /// Listeners the origin sent it since its last report (listeners), so that redirects
    /// between two reports spread over the edges instead of all going to one.
    pub sent: u64,
    /// The edge serves the requested mount (it reported the mount live).
    pub carries: bool,
}

/// Room left on an edge (listeners): capacity less listeners and those sent since its report.
pub fn room(e: &EdgeLoad) -> u64 {
    e.capacity
        .saturating_sub(e.listeners.saturating_add(e.sent))
}

/// The edge a listener is sent to: of those that carry the mount and have room, the one with
/// the most room (the least loaded, as Icecast-KH picks its slave); the first of equals.
/// `None` when no edge can take the listener.
pub fn pick(edges: &[EdgeLoad]) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, e) in edges.iter().enumerate() {
        let r = room(e);
        if e.carries && r > 0 && best.is_none_or(|(_, b)| r > b) {
            best = Some((i, r));
        }
    }
    best.map(|(i, _)| i)
}

/// Whether an edge last heard from at `last` is dropped at `now` (silent longer than
/// `timeout`).
pub fn expired(last: Instant, now: Instant, timeout: Duration) -> bool {
    now.saturating_duration_since(last) > timeout
}

/// Whether a listener is redirected under `mode`: with `overflow` only when the origin is
/// `full` (mount `max-listeners` or `clients` reached), with `all` always, with `off` never.
pub fn wants_redirect(mode: RedirectMode, full: bool) -> bool {
    match mode {
        RedirectMode::Overflow => full,
        RedirectMode::All => true,
        RedirectMode::Off => false,
    }
}

/// Longest edge URL accepted in a report (bytes).
pub const MAX_EDGE_URL: usize = 2048;

/// Most listeners an edge may report as its capacity or its audience (a million times the
/// largest box): larger figures are refused, so sums over 1,000 edges cannot overflow.
pub const MAX_EDGE_LISTENERS: u64 = 1 << 40;

/// Whether `url` may be an edge's base URL, which the origin writes into the `Location` of its
/// redirects: an absolute `http://` or `https://` URL with a host, at most [`MAX_EDGE_URL`]
/// bytes, without user info, query or fragment, and without control characters, spaces, `"`,
/// `<`, `>`, `\\` or `` ` `` anywhere (RFC 3986 section 2: none of them may appear unencoded in a
/// URI; a CR or LF in a header value would split the response, RFC 9110 section 5.5).
pub fn valid_edge_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    url.len() <= MAX_EDGE_URL
        && !authority.is_empty()
        && !authority.contains('@')
        && !authority.starts_with(':')
        && !url.contains(['?', '#'])
        && !url.bytes().any(|b| {
            b.is_ascii_control()
                || matches!(b, b' ' | b'"' | b'<' | b'>' | b'\\' | b'`')
                || b >= 0x80
        })
}

/// The `Location` of a redirect to the edge at `base` (`http://edge1:8000`, a trailing `/`
/// ignored) of a request for `target` (the raw request target: path and query as sent, so the
/// query string, e.g. a URL-auth token, is kept).
pub fn location(base: &str, target: &str) -> String {
    let base = base.trim_end_matches('/');
    if target.starts_with('/') {
        format!("{base}{target}")
    } else {
        format!("{base}/{target}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(capacity: u64, listeners: u64, sent: u64, carries: bool) -> EdgeLoad {
        EdgeLoad {
            capacity,
            listeners,
            sent,
            carries,
        }
    }

    #[test]
    fn the_edge_with_most_room_that_carries_the_mount_is_picked() {
        let edges = [
            edge(100, 10, 0, true),    // room 90
            edge(1000, 100, 0, false), // most room, but not the mount
            edge(200, 50, 0, true),    // room 150
            edge(200, 50, 0, true),    // equal: the first wins
        ];
        assert_eq!(pick(&edges), Some(2));
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[edge(10, 10, 0, true), edge(10, 4, 6, true)]), None);
    }

    #[test]
    fn listeners_sent_since_a_report_count_against_room() {
        let mut edges = [edge(100, 0, 0, true), edge(100, 0, 0, true)];
        let mut got = Vec::new();
        for _ in 0..6 {
            let i = pick(&edges).unwrap();
            edges[i].sent += 1;
            got.push(i);
        }
        assert_eq!(got, [0, 1, 0, 1, 0, 1]);
        assert_eq!(room(&edge(5, 4, 3, true)), 0);
    }

    #[test]
    fn an_edge_expires_after_the_timeout() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(15);
        assert!(!expired(t0, t0 + timeout, timeout));
        assert!(expired(
            t0,
            t0 + timeout + Duration::from_millis(1),
            timeout
        ));
        assert!(
            !expired(t0 + timeout, t0, timeout),
            "a clock read before the report"
        );
    }

    #[test]
    fn modes_decide_redirects() {
        assert!(wants_redirect(RedirectMode::Overflow, true));
        assert!(!wants_redirect(RedirectMode::Overflow, false));
        assert!(wants_redirect(RedirectMode::All, false));
        assert!(!wants_redirect(RedirectMode::Off, true));
    }

    #[test]
    fn an_edge_url_is_an_absolute_http_url_with_nothing_to_inject() {
        for ok in [
            "http://edge1.example.com:8000",
            "https://edge1.example.com",
            "http://10.0.0.7:8000/",
            "http://[::1]:8000",
            "https://cdn.example.com/radio",
        ] {
            assert!(valid_edge_url(ok), "{ok}");
        }
        for bad in [
            "http://edge1\r\nSet-Cookie: a=b",
            "http://edge1/\nx",
            "http://edge1/\tx",
            "ftp://edge1",
            "//edge1",
            "edge1:8000",
            "http://",
            "http:///path",
            "http://:8000",
            "http://user:pw@edge1",
            "http://edge1/?x=1",
            "http://edge1/#top",
            "http://edge 1",
            "http://edge1/\"x",
            "http://edge1/<x>",
            "http://édge1",
        ] {
            assert!(!valid_edge_url(bad), "{bad:?}");
        }
        assert!(!valid_edge_url(&format!(
            "http://e/{}",
            "a".repeat(MAX_EDGE_URL)
        )));
    }

    #[test]
    fn location_keeps_path_and_query() {
        assert_eq!(
            location("http://edge1:8001/", "/live.mp3?token=a%20b&x=1"),
            "http://edge1:8001/live.mp3?token=a%20b&x=1"
        );
        assert_eq!(location("http://e:1", "/a"), "http://e:1/a");
    }
}
