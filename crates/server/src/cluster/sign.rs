//! Signed edge reports: an edge signs the exact bytes of its report with the cluster secret
//! (HMAC-SHA256, RFC 2104, `ring::hmac`), sent base64 in the [`SIGNATURE_HEADER`] header; the
//! report itself carries the time it was made (`time`, Unix milliseconds), so the timestamp is
//! inside the signature. The origin checks the signature before reading the report, then its
//! freshness ([`fresh`]): a report older than [`MAX_REPORT_AGE_MS`] (or from too far in the
//! future), or not newer than the edge's last accepted one, is refused, so a captured report
//! cannot be replayed. Pure: no clock, no I/O.

use base64::Engine as _;

/// The request header holding a report's signature (base64 of the HMAC-SHA256 of the body).
pub const SIGNATURE_HEADER: &str = "x-throng-signature";

/// Oldest (and furthest in the future) a report's `time` may be, in milliseconds, against the
/// origin's clock: edges and origin are expected to run NTP.
pub const MAX_REPORT_AGE_MS: u64 = 30_000;

/// Why a report's timestamp is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StaleReport {
    /// More than [`MAX_REPORT_AGE_MS`] away from the origin's clock.
    #[error("the report's time is more than 30 s away from the origin's clock")]
    OutOfWindow,
    /// Not newer than the last report accepted from this edge (a replay).
    #[error("the report is not newer than the edge's last one")]
    Replayed,
}

fn key(secret: &str) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes())
}

/// The signature of `body` under `secret`, base64 (standard alphabet).
pub fn sign(secret: &str, body: &[u8]) -> String {
    let tag = ring::hmac::sign(&key(secret), body);
    base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
}

/// Whether `signature` (base64) is the signature of `body` under `secret` (compared in
/// constant time).
pub fn verify(secret: &str, body: &[u8], signature: &str) -> bool {
    let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
        return false;
    };
    ring::hmac::verify(&key(secret), body, &tag).is_ok()
}

/// Whether a report made at `sent_ms` may be accepted at `now_ms` (Unix milliseconds) from an
/// edge whose last accepted report was made at `last_ms` (none for a new edge).
///
/// Errors: [`StaleReport`].
pub fn fresh(sent_ms: u64, now_ms: u64, last_ms: Option<u64>) -> Result<(), StaleReport> {
    if sent_ms.abs_diff(now_ms) > MAX_REPORT_AGE_MS {
        return Err(StaleReport::OutOfWindow);
    }
    if last_ms.is_some_and(|last| sent_ms <= last) {
        return Err(StaleReport::Replayed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_every_byte_and_the_secret() {
        let body = br#"{"url":"http://e:8000","time":1}"#;
        let sig = sign("s3cret", body);
        assert!(verify("s3cret", body, &sig));
        assert!(!verify("other", body, &sig));
        assert!(!verify(
            "s3cret",
            br#"{"url":"http://e:8000","time":2}"#,
            &sig
        ));
        assert!(!verify("s3cret", body, "not base64!"));
        assert!(!verify("s3cret", body, ""));
        // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
        // (hex 5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843)
        let expected = "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=";
        assert_eq!(sign("Jefe", b"what do ya want for nothing?"), expected);
    }

    #[test]
    fn old_future_and_replayed_reports_are_refused() {
        let now = 1_800_000_000_000;
        assert_eq!(fresh(now - 1_000, now, None), Ok(()));
        assert_eq!(fresh(now + 1_000, now, None), Ok(()));
        assert_eq!(
            fresh(now - 31_000, now, None),
            Err(StaleReport::OutOfWindow)
        );
        assert_eq!(
            fresh(now + 31_000, now, None),
            Err(StaleReport::OutOfWindow)
        );
        assert_eq!(fresh(now, now, Some(now)), Err(StaleReport::Replayed));
        assert_eq!(
            fresh(now - 5, now, Some(now - 2)),
            Err(StaleReport::Replayed)
        );
        assert_eq!(fresh(now, now, Some(now - 2)), Ok(()));
    }
}
