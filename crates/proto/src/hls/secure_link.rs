//! Signed HLS session tokens a cache tier checks itself, as nginx's `secure_link` module does
//! (`ngx_http_secure_link_module`, `secure_link` + `secure_link_md5`): the token in
//! `/hls/<mount>/s/<token>/…` is `<id>-<expires>-<md5>`, where `<expires>` is a Unix time in
//! seconds and `<md5>` the MD5 digest of `"<expires>/hls<mount>/s/<id> <secret>"` in base64url
//! without padding (22 characters), exactly what
//!
//! ```nginx
//! secure_link $throng_md5,$throng_expires;
//! secure_link_md5 "$throng_expires$throng_signed $secret";
//! ```
//!
//! checks with the captures of `deploy/nginx/hls-cache.conf`. The signature covers the mount
//! and the session's id, so a token opens one session's playlists and segments of one mount
//! until it expires; it is issued by Throng's multivariant playlist after listener
//! authentication.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use md5::{Digest, Md5};

/// Why a token does not open a signed mount's URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// The token is not `<id>-<expires>-<md5>`.
    #[error("the session token is not signed")]
    Unsigned,
    /// The digest does not match (another mount, another id, another secret, altered).
    #[error("the session token's signature does not match")]
    Forged,
    /// The signature matches but `<expires>` has passed.
    #[error("the session token has expired")]
    Expired,
}

/// The digest of session `id` of mount `mount` valid until `expires` with `secret`, base64url.
fn digest(id: &str, mount: &str, expires: u64, secret: &str) -> String {
    let mut h = Md5::new();
    h.update(format!("{expires}/hls{mount}/s/{id} {secret}").as_bytes());
    URL_SAFE_NO_PAD.encode(h.finalize())
}

/// The signed token of session `id` (ASCII alphanumerics) of mount `mount`, valid until
/// `expires` (Unix seconds).
pub fn sign(id: &str, mount: &str, expires: u64, secret: &str) -> String {
    format!("{id}-{expires}-{}", digest(id, mount, expires, secret))
}

/// Checks `token` for mount `mount` at `now` (Unix seconds).
///
/// Errors: [`LinkError`].
pub fn check(token: &str, mount: &str, secret: &str, now: u64) -> Result<(), LinkError> {
    let mut parts = token.splitn(3, '-');
    let (Some(id), Some(exp), Some(md5)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(LinkError::Unsigned);
    };
    let Ok(expires) = exp.parse::<u64>() else {
        return Err(LinkError::Unsigned);
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(LinkError::Unsigned);
    }
    // Constant-time enough for a 22-character digest compared once per request: equal
    // lengths, every byte looked at.
    let want = digest(id, mount, expires, secret);
    let same = want.len() == md5.len()
        && want
            .bytes()
            .zip(md5.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return Err(LinkError::Forged);
    }
    if expires < now {
        return Err(LinkError::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_secure_link_md5_layout() {
        // `echo -n '2147483647/hls/live.mp3/s/abc secret' | openssl md5 -binary | openssl
        // base64 | tr +/ -_ | tr -d =`, as nginx's documentation computes it.
        assert_eq!(
            digest("abc", "/live.mp3", 2_147_483_647, "secret"),
            "2niA8oZwclDLs6kv-rB3GQ"
        );
        let t = sign("abc", "/live.mp3", 2_147_483_647, "secret");
        assert_eq!(t, "abc-2147483647-2niA8oZwclDLs6kv-rB3GQ");
        assert!(crate::hls::path::is_token(&t));
    }

    #[test]
    fn checks() {
        let t = sign("Ab3", "/live.mp3", 1_000, "s3cret");
        assert_eq!(check(&t, "/live.mp3", "s3cret", 999), Ok(()));
        assert_eq!(check(&t, "/live.mp3", "s3cret", 1_000), Ok(()));
        assert_eq!(
            check(&t, "/live.mp3", "s3cret", 1_001),
            Err(LinkError::Expired)
        );
        assert_eq!(check(&t, "/other.mp3", "s3cret", 1), Err(LinkError::Forged));
        assert_eq!(check(&t, "/live.mp3", "guess", 1), Err(LinkError::Forged));
        let later = t.replace("-1000-", "-9999-");
        assert_eq!(
            check(&later, "/live.mp3", "s3cret", 1),
            Err(LinkError::Forged)
        );
        assert_eq!(
            check("Ab3", "/live.mp3", "s3cret", 1),
            Err(LinkError::Unsigned)
        );
        assert_eq!(
            check("Ab3-x-y", "/live.mp3", "s3cret", 1),
            Err(LinkError::Unsigned)
        );
    }
}
