//! HLS session tokens Throng issues carry a keyed MAC (issue 42, item 4), so the cache tier's
//! request logs (`hls/cache_log.rs`) open a session only for a token Throng issued: a token in
//! the session table is known (looked up); one that is not (its session expired during a gap
//! in the logs, or it was opened before a restart or by another node sharing the key) opens a
//! session only when its MAC checks. A forged token opens nothing.
//!
//! Shape of an unsigned mount's token: 16 ASCII alphanumerics (the random id) and 16
//! lowercase hex digits, the first 8 bytes of HMAC-SHA256 (RFC 2104, FIPS 180-4) of
//! `"throng-hls-session:<id>"` under the key: 32 characters, a valid path token
//! (`throng_proto::hls::path::is_token`). The key is `[hls] token-secret` when set (shared by a
//! cluster's nodes, kept across restarts), else 32 random bytes drawn when the server starts.
//! A mount that signs tokens (`secure-link-secret`) keeps nginx's signed form
//! (`throng_proto::hls::secure_link`): that signature is its MAC.

use rand::distributions::{Alphanumeric, DistString};
use rand::RngCore;
use ring::hmac;

/// Characters of a token's random id.
pub const ID_LEN: usize = 16;

/// Hex digits of a token's MAC (8 bytes: 64 bits).
pub const MAC_LEN: usize = 16;

/// The key of session tokens when `[hls] token-secret` is not set: drawn once per process.
pub struct TokenKeys {
    random: [u8; 32],
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(..)")
    }
}

impl Default for TokenKeys {
    fn default() -> Self {
        let mut random = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut random);
        TokenKeys { random }
    }
}

impl TokenKeys {
    /// The HMAC key in force: `secret` (`[hls] token-secret`) if set, else the process's
    /// random key.
    fn key(&self, secret: Option<&str>) -> hmac::Key {
        match secret {
            Some(s) => hmac::Key::new(hmac::HMAC_SHA256, s.as_bytes()),
            None => hmac::Key::new(hmac::HMAC_SHA256, &self.random),
        }
    }

    /// A new token: a random id and its MAC under the key of `secret` (see the module
    /// comment for the shape).
    pub fn issue(&self, secret: Option<&str>) -> String {
        let id = Alphanumeric.sample_string(&mut rand::thread_rng(), ID_LEN);
        self.with_id(&id, secret)
    }

    /// The token of random id `id` under the key of `secret`: `id` then its MAC in hex.
    pub fn with_id(&self, id: &str, secret: Option<&str>) -> String {
        let mut t = String::with_capacity(id.len() + MAC_LEN);
        t.push_str(id);
        t.push_str(&mac_hex(&self.key(secret), id));
        t
    }

    /// Whether `token` is one [`issue`](Self::issue) made under the key of `secret`: 16
    /// alphanumerics and their MAC (compared in constant time).
    pub fn issued(&self, token: &str, secret: Option<&str>) -> bool {
        if token.len() != ID_LEN + MAC_LEN || !token.is_ascii() {
            return false;
        }
        let (id, mac) = token.split_at(ID_LEN);
        id.bytes().all(|b| b.is_ascii_alphanumeric())
            && throng_proto::auth::secrets_equal(mac, &mac_hex(&self.key(secret), id))
    }
}

/// The first [`MAC_LEN`] / 2 bytes of HMAC-SHA256 of id `id` under `key`, lowercase hex.
fn mac_hex(key: &hmac::Key, id: &str) -> String {
    let tag = hmac::sign(key, format!("throng-hls-session:{id}").as_bytes());
    tag.as_ref()[..MAC_LEN / 2]
        .iter()
        .fold(String::with_capacity(MAC_LEN), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tokens_issued_under_the_key_are_issued() {
        let keys = TokenKeys::default();
        let t = keys.issue(None);
        assert_eq!(t.len(), ID_LEN + MAC_LEN);
        assert!(throng_proto::hls::path::is_token(&t), "{t}");
        assert!(keys.issued(&t, None));
        // Another process's random key, or a configured secret: not issued here.
        assert!(!TokenKeys::default().issued(&t, None));
        assert!(!keys.issued(&t, Some("a-shared-secret-of-the-cluster")));
        // A shared secret: any node's keys check it.
        let shared = keys.issue(Some("a-shared-secret-of-the-cluster"));
        assert!(TokenKeys::default().issued(&shared, Some("a-shared-secret-of-the-cluster")));
        // Forged: a random 32-character token, one changed character, a truncated MAC.
        assert!(!keys.issued("Tok1", None));
        assert!(!keys.issued(&"A".repeat(32), None));
        let mut altered = t.clone().into_bytes();
        altered[3] = if altered[3] == b'a' { b'b' } else { b'a' };
        assert!(!keys.issued(std::str::from_utf8(&altered).unwrap(), None));
        assert!(!keys.issued(&t[..31], None));
        assert!(!keys.issued(&format!("{t}0"), None));
        assert_eq!(keys.with_id(&t[..ID_LEN], None), t);
    }
}
