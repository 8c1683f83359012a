//! The credentials of a WHIP publish (RFC 9725 §4.5: WHIP clients send
//! `Authorization: Bearer <token>`; the token here is the mount's source password), or HTTP
//! Basic as every source client sends: checked against the mount's source user and password
//! (`Config::source_credentials`), the password in constant time. Pure.

use throng_proto::auth::{parse_basic, secrets_equal};

/// What an `Authorization` header presents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    /// `Basic`: a user and a password.
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// `Bearer <token>` (RFC 6750 §2.1): the source password, for any source user.
    Bearer(String),
}

/// Reads an `Authorization` header value; `None` for a missing, empty or other scheme.
pub fn presented(header: Option<&str>) -> Option<Presented> {
    let value = header?.trim();
    if let Some(c) = parse_basic(value) {
        return Some(Presented::Basic {
            user: c.user,
            password: c.password,
        });
    }
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty())
        .then(|| Presented::Bearer(token.to_owned()))
}

/// Whether `p` matches the source `user` and `password` of the mount.
pub fn matches(p: &Presented, user: &str, password: &str) -> bool {
    match p {
        Presented::Basic {
            user: u,
            password: pw,
        } => u == user && secrets_equal(pw, password),
        Presented::Bearer(token) => secrets_equal(token, password),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::auth::basic_authorization;

    #[test]
    fn basic_and_bearer_are_read() {
        let basic = basic_authorization("source", "hack:me");
        assert_eq!(
            presented(Some(&basic)),
            Some(Presented::Basic {
                user: "source".into(),
                password: "hack:me".into()
            })
        );
        assert_eq!(
            presented(Some("Bearer  s3cret ")),
            Some(Presented::Bearer("s3cret".into()))
        );
        assert_eq!(
            presented(Some("bearer x")),
            Some(Presented::Bearer("x".into()))
        );
        assert_eq!(presented(Some("Bearer ")), None);
        assert_eq!(presented(Some("Digest abc")), None);
        assert_eq!(presented(Some("")), None);
        assert_eq!(presented(None), None);
    }

    #[test]
    fn user_and_password_must_both_match() {
        let ok = |p: &Presented| matches(p, "dj", "pw");
        assert!(ok(&Presented::Bearer("pw".into())));
        assert!(!ok(&Presented::Bearer("pW".into())));
        assert!(ok(&Presented::Basic {
            user: "dj".into(),
            password: "pw".into()
        }));
        assert!(!ok(&Presented::Basic {
            user: "source".into(),
            password: "pw".into()
        }));
        assert!(!ok(&Presented::Basic {
            user: "dj".into(),
            password: "p".into()
        }));
    }
}
