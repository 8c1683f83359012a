//! `<alias>` of Icecast's `<paths>` (`[[paths.alias]]`): a GET or HEAD request for an alias's
//! source path is answered as one for its destination, as Icecast 2.4.4
//! `connection.c:_handle_get_request` does (exact path, the query string kept). AzuraCast writes
//! `/` → `/status.xsl` for every station. Pure: the connection calls [`apply`] on the request
//! head and the bytes read so far before it routes the request.

use throng_proto::http::RequestHead;

use crate::config::Paths;

/// Rewrites the request to its alias's destination, if `paths` has an alias for its path:
/// `head.path` and `head.target`, and the request line at the start of `buf` (the admin stack
/// reads the request again from `buf`), with `head_len` moved by the change in length.
/// Returns whether the request was rewritten. Only GET and HEAD requests are aliased.
pub fn apply(
    paths: &Paths,
    head: &mut RequestHead,
    buf: &mut Vec<u8>,
    head_len: &mut usize,
) -> bool {
    if !matches!(head.method.as_str(), "GET" | "HEAD") {
        return false;
    }
    let dest = paths.resolve_alias(&head.path);
    if dest == head.path {
        return false;
    }
    let target = match &head.query {
        Some(q) => format!("{dest}?{q}"),
        None => dest.to_owned(),
    };
    // The request line: METHOD SP target SP version.
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let Some(first) = buf[..line_end].iter().position(|&b| b == b' ') else {
        return false;
    };
    let Some(len) = buf[first + 1..line_end].iter().position(|&b| b == b' ') else {
        return false;
    };
    let old = first + 1..first + 1 + len;
    let delta = target.len() as isize - len as isize;
    buf.splice(old, target.bytes());
    *head_len = head_len.saturating_add_signed(delta);
    head.path = dest.to_owned();
    head.target = target;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Alias;
    use throng_proto::http::parse_request_head;

    fn paths() -> Paths {
        Paths {
            alias: vec![Alias {
                source: "/".into(),
                destination: "/status.xsl".into(),
            }],
            ..Paths::default()
        }
    }

    #[test]
    fn the_source_path_is_answered_as_the_destination_with_its_query() {
        let raw = b"GET /?x=1 HTTP/1.1\r\nHost: a\r\n\r\nBODY".to_vec();
        let (mut head, mut len) = parse_request_head(&raw).unwrap().unwrap();
        let mut buf = raw.clone();
        assert!(apply(&paths(), &mut head, &mut buf, &mut len));
        assert_eq!(head.path, "/status.xsl");
        assert_eq!(head.target, "/status.xsl?x=1");
        assert_eq!(&buf[len..], b"BODY");
        let (again, again_len) = parse_request_head(&buf).unwrap().unwrap();
        assert_eq!(again.path, "/status.xsl");
        assert_eq!(again.query.as_deref(), Some("x=1"));
        assert_eq!(again_len, len);
    }

    #[test]
    fn other_paths_and_methods_are_left_alone() {
        for raw in [
            &b"GET /live.mp3 HTTP/1.0\r\n\r\n"[..],
            &b"GET /index.html HTTP/1.0\r\n\r\n"[..],
            &b"SOURCE / HTTP/1.0\r\n\r\n"[..],
        ] {
            let (mut head, mut len) = parse_request_head(raw).unwrap().unwrap();
            let mut buf = raw.to_vec();
            let before = (head.clone(), len);
            assert!(!apply(&paths(), &mut head, &mut buf, &mut len));
            assert_eq!((head, len), before);
            assert_eq!(buf, raw);
        }
    }
}
