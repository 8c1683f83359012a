//! HTTP Basic credentials (RFC 7617), as Icecast sources, admins and relays send them.
//!
//! Icecast 2.4.4 (`client.c:client_check_source_auth`) expects user `source` and the source
//! password; admin calls use the admin user and password. Passwords are compared in constant time.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// User and password decoded from an `Authorization: Basic ...` header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name (before the first `:`).
    pub user: String,
    /// The password (after the first `:`; may contain `:`).
    pub password: String,
}

/// Decodes an `Authorization` header value; `None` unless it is well-formed `Basic` credentials.
pub fn parse_basic(value: &str) -> Option<Credentials> {
    let (scheme, b64) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = STANDARD.decode(b64.trim()).ok()?;
    let text = crate::http::decode_text(&raw);
    let (user, password) = text.split_once(':')?;
    Some(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

/// The `Authorization` header value for `user`/`password`: `Basic base64(user:password)`.
pub fn basic_authorization(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

/// Compares two secrets in time independent of where they differ (lengths may leak).
pub fn secrets_equal(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_colon_in_password() {
        let v = basic_authorization("source", "pa:ss");
        assert_eq!(v, "Basic c291cmNlOnBhOnNz");
        let c = parse_basic(&v).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("source", "pa:ss"));
    }

    #[test]
    fn rejects_other_schemes_and_bad_base64() {
        assert_eq!(parse_basic("Bearer abc"), None);
        assert_eq!(parse_basic("Basic !!!"), None);
        assert_eq!(parse_basic("Basic bm9jb2xvbg=="), None); // "nocolon"
    }

    #[test]
    fn secrets_compare() {
        assert!(secrets_equal("hackme", "hackme"));
        assert!(!secrets_equal("hackme", "hackmf"));
        assert!(!secrets_equal("hackme", "hack"));
    }
}
