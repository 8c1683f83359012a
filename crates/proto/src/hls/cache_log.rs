//! The cache tier's HLS request logs, sans-IO: one line per request a cache (nginx, a CDN
//! edge) answered, as JSON, either bare (a CDN's log streaming, `POST
//! /api/v1/hls/cache-logs`, one object per line) or inside a syslog message (nginx
//! `access_log syslog:server=…`: `<PRI>Mmm dd hh:mm:ss host tag: {…}`, RFC 3164 as nginx
//! writes it, `ngx_syslog.c`). The object is the `throng_hls` format of
//! `deploy/nginx/hls-cache.conf` (`log_format … escape=json`):
//!
//! ```text
//! {"addr":"$remote_addr","uri":"$request_uri","status":$status,"bytes":$body_bytes_sent,
//!  "agent":"$http_user_agent","referer":"$http_referer"}
//! ```
//!
//! Only `uri` is required; `status` defaults to 200, `bytes` to 0; other keys are ignored, so
//! a CDN's richer records can be sent as they are once renamed. [`session_request`] says
//! which mount and session a line is a request of (`path.rs` reads the URI).

use std::borrow::Cow;
use std::net::IpAddr;

use serde::Deserialize;

use crate::hls::path::{self, Target};

/// Longest line read (bytes); longer ones are refused.
pub const MAX_LINE: usize = 8 * 1024;

/// One request the cache answered. Its text borrows from the line where the JSON has no
/// escape (the usual case: no allocation per line, issue 24's origin cost).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CacheLogLine<'a> {
    /// The client's address (`$remote_addr`), if it was an address.
    #[serde(default, deserialize_with = "lenient_ip")]
    pub addr: Option<IpAddr>,
    /// The request URI as the client sent it, query included (`$request_uri`).
    #[serde(borrow)]
    pub uri: Cow<'a, str>,
    /// The status the cache answered (`$status`), 200 when absent.
    #[serde(default = "ok")]
    pub status: u16,
    /// Body bytes sent to the client (`$body_bytes_sent`).
    #[serde(default)]
    pub bytes: u64,
    /// The client's User-Agent (`$http_user_agent`); empty or `-` when none.
    #[serde(default, borrow)]
    pub agent: Option<Cow<'a, str>>,
    /// The client's Referer (`$http_referer`); empty or `-` when none.
    #[serde(default, borrow)]
    pub referer: Option<Cow<'a, str>>,
}

fn ok() -> u16 {
    200
}

/// An address, or `None` for anything else (`-`, a host name, `null`), read without
/// allocating.
fn lenient_ip<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<IpAddr>, D::Error> {
    struct Lenient;
    impl<'de> serde::de::Visitor<'de> for Lenient {
        type Value = Option<IpAddr>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an address or null")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(v.parse().ok())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(Lenient)
        }
    }
    d.deserialize_option(Lenient)
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheLogError {
    /// The line is longer than [`MAX_LINE`].
    #[error("log line longer than {MAX_LINE} bytes")]
    TooLong,
    /// No JSON object in the line (nor after a syslog header).
    #[error("no JSON object in the log line")]
    NoObject,
    /// The object is not a request record (the message says what was wrong).
    #[error("bad log record: {0}")]
    Bad(String),
}

/// Reads one log line: a bare JSON object or a syslog message carrying one.
pub fn parse_line(line: &str) -> Result<CacheLogLine<'_>, CacheLogError> {
    if line.len() > MAX_LINE {
        return Err(CacheLogError::TooLong);
    }
    let line = line.trim();
    let json = if line.starts_with('{') {
        line
    } else if line.starts_with('<') {
        // Syslog: the message follows the header, which holds no `{`.
        &line[line.find('{').ok_or(CacheLogError::NoObject)?..]
    } else {
        return Err(CacheLogError::NoObject);
    };
    let mut rec: CacheLogLine = serde_json::from_str(json).map_err(|e| {
        // Only the position: the line's own text is not echoed.
        CacheLogError::Bad(format!(
            "line {} column {}: {:?}",
            e.line(),
            e.column(),
            e.classify()
        ))
    })?;
    for v in [&mut rec.agent, &mut rec.referer] {
        if v.as_deref().is_some_and(|s| s.is_empty() || s == "-") {
            *v = None;
        }
    }
    Ok(rec)
}

/// A session's request named by a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRequest<'a> {
    /// What the URI names (its mount name and kind).
    pub target: Target<'a>,
    /// The session token, from the path or a per-session playlist's `session=` query.
    pub token: &'a str,
    /// The cache answered with the resource (2xx or 304): a request that failed keeps no
    /// session alive.
    pub served: bool,
}

/// The session request `line` records, if it is one: an HLS path with a session token.
pub fn session_request<'a>(line: &'a CacheLogLine<'_>) -> Option<SessionRequest<'a>> {
    let (p, query) = match line.uri.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (&*line.uri, None),
    };
    let target = path::parse(p)?;
    let token = target
        .token()
        .or_else(|| query.and_then(path::query_token))?;
    Some(SessionRequest {
        target,
        token,
        served: (200..300).contains(&line.status) || line.status == 304,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_and_bare_lines() {
        // As nginx 1.22 sends it (`access_log syslog:server=127.0.0.1:5140,tag=throng throng_hls`).
        let l = parse_line(
            "<190>Nov 27 02:20:00 cache1 throng: {\"addr\":\"203.0.113.9\",\
             \"uri\":\"/hls/live.mp3/s/Ab3/1700.mp3\",\"status\":200,\"bytes\":48213,\
             \"agent\":\"hls.js\",\"referer\":\"\"}",
        )
        .unwrap();
        assert_eq!(l.addr, Some("203.0.113.9".parse().unwrap()));
        assert_eq!((l.status, l.bytes), (200, 48_213));
        assert_eq!(l.agent.as_deref(), Some("hls.js"));
        assert_eq!(l.referer, None);
        let r = session_request(&l).unwrap();
        assert_eq!(r.token, "Ab3");
        assert_eq!(r.target.mount(), "/live.mp3");
        assert_eq!(r.target.kind(), "segment");
        assert!(r.served);

        assert!(matches!(l.uri, Cow::Borrowed(_)), "no escape: borrowed");
        let l = parse_line("{\"uri\":\"/hls/a/index.m3u8?session=Q1&_HLS_msn=4\",\"addr\":\"-\"}")
            .unwrap();
        assert_eq!((l.addr, l.status, l.bytes), (None, 200, 0));
        let r = session_request(&l).unwrap();
        assert_eq!((r.token, r.target.kind()), ("Q1", "playlist"));
        // Escapes (nginx `escape=json`) are read, into an owned string.
        let l = parse_line(
            "{\"uri\":\"/hls/a/s/T/5.mp3\",\"agent\":\"A \\\"quoted\\\" UA\",\"addr\":null}",
        )
        .unwrap();
        assert_eq!(l.agent.as_deref(), Some("A \"quoted\" UA"));
        assert_eq!(l.addr, None);
    }

    #[test]
    fn lines_that_are_not_session_requests() {
        let l = parse_line("{\"uri\":\"/hls/a/index.m3u8\"}").unwrap();
        assert_eq!(
            session_request(&l),
            None,
            "the multivariant playlist has no token"
        );
        let l = parse_line("{\"uri\":\"/live.mp3\",\"status\":200}").unwrap();
        assert_eq!(session_request(&l), None);
        let l = parse_line("{\"uri\":\"/hls/a/s/T/5.mp3\",\"status\":404}").unwrap();
        assert!(!session_request(&l).unwrap().served);
    }

    #[test]
    fn bad_lines() {
        assert_eq!(parse_line("hello"), Err(CacheLogError::NoObject));
        assert_eq!(
            parse_line("<13>Nov 1 host x: no json"),
            Err(CacheLogError::NoObject)
        );
        assert!(matches!(
            parse_line("{\"status\":200}"),
            Err(CacheLogError::Bad(_))
        ));
        assert!(matches!(
            parse_line("{\"uri\":5}"),
            Err(CacheLogError::Bad(_))
        ));
        let long = format!("{{\"uri\":\"{}\"}}", "a".repeat(MAX_LINE));
        assert_eq!(parse_line(&long), Err(CacheLogError::TooLong));
    }
}
