//! Canonical mount names: the one rule deciding which names a source may create, a listener may
//! ask for and an admin `mount=` parameter may name, and how a name is written into a link.
//!
//! A mount name is checked after percent-decoding (so `%2e%2e` is `..`). It is canonical when
//! it starts with `/`, has no empty segment (`//`, a trailing `/`), no `.` or `..` segment, no
//! backslash and no control character. Icecast 2.4.4 refuses the same requests before they
//! reach a mount (`util.c:util_normalise_uri` and its `verify_path`: a `.`/`..` segment or a
//! doubled separator, with `\` counted as a separator, makes the URI invalid and the connection
//! is dropped); backslashes are refused outright here because browsers read `/\host/x` as
//! `//host/x`, another host. [`href_path`] percent-encodes a name for an HTML `href`/`src`.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use thiserror::Error;

/// Why a mount name is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MountNameError {
    /// The name does not start with `/`, or is `/` alone.
    #[error("a mount name starts with '/' and names something after it")]
    NotAbsolute,
    /// A segment is empty (`//`, or a trailing `/`).
    #[error("empty path segment in mount name")]
    EmptySegment,
    /// A segment is `.` or `..`.
    #[error("dot segment in mount name")]
    DotSegment,
    /// The name has a backslash (read as `/` by browsers and by Icecast).
    #[error("backslash in mount name")]
    Backslash,
    /// The name has a control character (C0, DEL or C1).
    #[error("control character in mount name")]
    Control,
}

/// Checks that `name` (percent-decoded) is a canonical mount name.
///
/// Errors: the first rule it breaks, as a [`MountNameError`].
pub fn check(name: &str) -> Result<(), MountNameError> {
    let Some(rest) = name.strip_prefix('/') else {
        return Err(MountNameError::NotAbsolute);
    };
    if rest.is_empty() {
        return Err(MountNameError::NotAbsolute);
    }
    if name.chars().any(char::is_control) {
        return Err(MountNameError::Control);
    }
    if name.contains('\\') {
        return Err(MountNameError::Backslash);
    }
    for segment in rest.split('/') {
        match segment {
            "" => return Err(MountNameError::EmptySegment),
            "." | ".." => return Err(MountNameError::DotSegment),
            _ => {}
        }
    }
    Ok(())
}

/// Whether `name` (percent-decoded) is a canonical mount name (see [`check`]).
pub fn is_canonical(name: &str) -> bool {
    check(name).is_ok()
}

/// Bytes percent-encoded in a link path: everything but RFC 3986 unreserved characters and `/`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `name` as the path of an HTML `href` or `src`: every byte but unreserved characters and
/// `/` percent-encoded (so quotes, `<`, `?`, `#`, `%`, spaces, backslashes and non-ASCII text
/// cannot change what the link points at). Still needs HTML escaping only for `&`, which is
/// encoded too, so the result can be placed in an attribute as it is.
pub fn href_path(name: &str) -> String {
    utf8_percent_encode(name, PATH).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_are_canonical() {
        for n in [
            "/live.mp3",
            "/a/b.ogg",
            "/my radio.mp3",
            "/Café.opus",
            "/..a",
            "/a..",
            "/.hidden",
            "/a/.b/c",
            "/stream",
        ] {
            assert_eq!(check(n), Ok(()), "{n}");
        }
    }

    #[test]
    fn non_canonical_names_are_refused() {
        use MountNameError::*;
        let cases = [
            ("", NotAbsolute),
            ("/", NotAbsolute),
            ("live.mp3", NotAbsolute),
            ("//evil.example/x.mp3", EmptySegment),
            ("/a//b.mp3", EmptySegment),
            ("/a/", EmptySegment),
            ("/a/../b.mp3", DotSegment),
            ("/a/./b.mp3", DotSegment),
            ("/..", DotSegment),
            ("/.", DotSegment),
            ("/a/..", DotSegment),
            ("/\\evil.example/x.mp3", Backslash),
            ("/a\\b.mp3", Backslash),
            ("/a\r\nX-Evil: 1", Control),
            ("/a\0b", Control),
            ("/a\u{7f}", Control),
            ("/a\u{85}", Control),
            ("/a\tb", Control),
        ];
        for (n, why) in cases {
            assert_eq!(check(n), Err(why), "{n:?}");
            assert!(!is_canonical(n));
        }
    }

    #[test]
    fn links_are_percent_encoded() {
        assert_eq!(href_path("/live.mp3"), "/live.mp3");
        assert_eq!(href_path("/a b/c~d_e-f.mp3"), "/a%20b/c~d_e-f.mp3");
        assert_eq!(
            href_path("/\\evil.example/x\"><script>"),
            "/%5Cevil.example/x%22%3E%3Cscript%3E"
        );
        assert_eq!(href_path("/a?b#c&d%e"), "/a%3Fb%23c%26d%25e");
        assert_eq!(href_path("/Café"), "/Caf%C3%A9");
    }
}
