//! A viewer's outgoing SRTP, sealed by the engine without a str0m round per packet.
//!
//! str0m keeps each session's SRTP contexts to itself, so a packet written through it costs a
//! `handle_timeout` round, two output polls over the session's state and a sealing: with
//! thousands of viewers that was two thirds of a viewer's CPU (docs/BENCHMARKS.md, issue 25).
//! An [`SrtpSender`] holds the same keys, derived from the DTLS-SRTP keying material the
//! session's handshake exported (`srtp_keys.rs`), and seals an RTP packet straight into the
//! engine's send batch. str0m still runs everything else of the session (ICE, DTLS, the
//! receiver reports coming back) and sends no RTP and no sender reports of its own, so the
//! sequence numbers and the SRTP index are this sender's alone.
//!
//! The rules and their sources:
//! - the keys: RFC 5764 §4.2 (the exporter's layout: client key, server key, client salt,
//!   server salt; a DTLS client sends with the client's), RFC 3711 §4.3.1 (the session
//!   keys from the master key and salt by AES in counter mode, key derivation rate 0) and
//!   RFC 7714 §11 (the 96-bit salt of the GCM profiles, zero-padded for that derivation), as
//!   str0m 0.24 `rtp/srtp.rs` does;
//! - the sealing: RFC 3711 §3.1 and §4.1.1 for AES128_CM_SHA1_80 (counter mode over the
//!   payload, an 80-bit HMAC-SHA1 tag over the packet and the rollover counter), RFC 7714
//!   §8.1 and §5.2.1 for the GCM profiles (the header as associated data, a 16-byte tag);
//!   the IVs are str0m-proto's public functions, the ciphers its crypto provider's;
//! - the index: the extended sequence number (rollover counter = its bits above 16,
//!   RFC 3711 §3.3.1), starting at a random 16-bit value (RFC 3550 §5.1).

use str0m::crypto::dtls::SrtpProfile;
use str0m::crypto::{
    AeadAes128Gcm, AeadAes128GcmCipher, AeadAes256Gcm, AeadAes256GcmCipher, Aes128CmSha1_80,
    Aes128CmSha1_80Cipher, CryptoProvider, Sha1HmacProvider, SrtpProvider,
};
use throng_proto::rtp_header::{self, RtpHeader, MAX_HEADER_BYTES};

use super::srtp_keys::SrtpKeys;

/// SRTP key-derivation labels (RFC 3711 §4.3.1): the RTP cipher key, authentication key and
/// salt.
const LABEL_RTP_CIPHER: u8 = 0x00;
const LABEL_RTP_AUTH: u8 = 0x01;
const LABEL_RTP_SALT: u8 = 0x02;

/// Room after the payload that the sealing may write, in bytes: the 16-byte GCM tag, or the
/// 10-byte HMAC tag with the block of scratch aws-lc-rs's counter mode wants (15 bytes).
pub const SEAL_OVERHEAD: usize = 16;

/// Why an [`SrtpSender`] could not be made or could not seal.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SrtpError {
    /// The keying material is not as long as its profile's (RFC 5764 §4.2).
    #[error("keying material of {got} bytes for {profile}, {want} expected")]
    BadMaterial {
        /// The profile negotiated.
        profile: String,
        /// Bytes received.
        got: usize,
        /// Bytes the profile takes.
        want: usize,
    },
    /// A profile this sender does not seal for.
    #[error("SRTP profile {0} not supported")]
    Profile(String),
    /// The header cannot be written (payload type over 127, a bad `mid`) or the buffer given
    /// is too short.
    #[error("RTP header or buffer invalid")]
    Header,
    /// The cipher refused (it does not, for valid lengths).
    #[error("SRTP sealing failed: {0}")]
    Cipher(String),
}

/// The RTP cipher of one profile.
enum Cipher {
    /// AES128_CM_SHA1_80 (RFC 3711).
    Cm {
        salt: [u8; 14],
        enc: Box<dyn Aes128CmSha1_80Cipher>,
        auth: [u8; 20],
        hmac: &'static dyn Sha1HmacProvider,
    },
    /// AEAD_AES_128_GCM (RFC 7714).
    Gcm128 {
        salt: [u8; 12],
        enc: Box<dyn AeadAes128GcmCipher>,
    },
    /// AEAD_AES_256_GCM (RFC 7714).
    Gcm256 {
        salt: [u8; 12],
        enc: Box<dyn AeadAes256GcmCipher>,
    },
}

/// One viewer's RTP sender: its stream's RTP header (SSRC, payload type, `mid` extension)
/// and its SRTP keys.
pub struct SrtpSender {
    ssrc: u32,
    /// The stream's header, written once; each packet stamps its sequence number and
    /// timestamp on a copy (`rtp_header::stamp`).
    header: [u8; MAX_HEADER_BYTES],
    /// Its length in bytes.
    hlen: usize,
    cipher: Cipher,
}

impl std::fmt::Debug for SrtpSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrtpSender")
            .field("ssrc", &self.ssrc)
            .field("header", &&self.header[..self.hlen])
            .finish_non_exhaustive()
    }
}

impl SrtpSender {
    /// A sender for the stream `ssrc` with payload type `pt` (0 to 127) and, when the session
    /// negotiated the `mid` header extension, `mid` = (its id, the `mid`), sealing with `keys`
    /// on `crypto`'s ciphers. Errors: the material does not fit its profile, the profile is
    /// none of the three WebRTC uses, or the header cannot be written (a payload type over
    /// 127, an extension id outside 1 to 14, a `mid` of 0 or over 16 bytes).
    pub fn new(
        keys: &SrtpKeys,
        crypto: &CryptoProvider,
        ssrc: u32,
        pt: u8,
        mid: Option<(u8, &str)>,
    ) -> Result<SrtpSender, SrtpError> {
        let srtp = crypto.srtp_provider;
        let cipher = match keys.profile {
            SrtpProfile::AES128_CM_SHA1_80 => {
                let mut auth = [0u8; 20];
                let (key, salt) = session::<16, 14>(srtp, keys, Some(&mut auth))?;
                Cipher::Cm {
                    salt,
                    enc: srtp.aes_128_cm_sha1_80().create_cipher(key, true),
                    auth,
                    hmac: crypto.sha1_hmac_provider,
                }
            }
            SrtpProfile::AEAD_AES_128_GCM => {
                let (key, salt) = session::<16, 12>(srtp, keys, None)?;
                Cipher::Gcm128 {
                    salt,
                    enc: srtp.aead_aes_128_gcm().create_cipher(key, true),
                }
            }
            SrtpProfile::AEAD_AES_256_GCM => {
                let (key, salt) = session::<32, 12>(srtp, keys, None)?;
                Cipher::Gcm256 {
                    salt,
                    enc: srtp.aead_aes_256_gcm().create_cipher(key, true),
                }
            }
            #[allow(unreachable_patterns)]
            other => return Err(SrtpError::Profile(other.to_string())),
        };
        let mut header = [0u8; MAX_HEADER_BYTES];
        let hlen = RtpHeader {
            pt,
            marker: false,
            seq: 0,
            ts: 0,
            ssrc,
            mid: mid.map(|(id, m)| (id, m.as_bytes())),
        }
        .write(&mut header)
        .ok_or(SrtpError::Header)?;
        Ok(SrtpSender {
            ssrc,
            header,
            hlen,
            cipher,
        })
    }

    /// The SSRC of the stream it sends.
    pub fn ssrc(&self) -> u32 {
        self.ssrc
    }

    /// The buffer a packet of `payload` bytes needs to be sealed into (the header, the
    /// payload and [`SEAL_OVERHEAD`]).
    pub fn room(&self, payload: usize) -> usize {
        self.hlen + payload + SEAL_OVERHEAD
    }

    /// Seals the RTP packet of `payload` with extended sequence number `index` (the SRTP
    /// index, RFC 3711 §3.3.1: the low 16 bits are the header's, the next 32 the rollover
    /// counter) and timestamp `ts` into `out` (at least [`SrtpSender::room`] bytes); the
    /// datagram's length. Errors: `out` too short, or the cipher refused.
    pub fn seal(
        &mut self,
        index: u64,
        ts: u32,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<usize, SrtpError> {
        if out.len() < self.room(payload.len()) {
            return Err(SrtpError::Header);
        }
        let seq = index as u16;
        let ssrc = self.ssrc;
        let hlen = self.hlen;
        out[..hlen].copy_from_slice(&self.header[..hlen]);
        rtp_header::stamp(&mut out[..hlen], seq, ts);
        let end = hlen + payload.len();
        let cipher_err = |e: str0m::crypto::CryptoError| SrtpError::Cipher(e.to_string());
        match &mut self.cipher {
            Cipher::Cm {
                salt,
                enc,
                auth,
                hmac,
            } => {
                let iv = Aes128CmSha1_80::rtp_iv(*salt, ssrc, index);
                enc.encrypt(&iv, payload, &mut out[hlen..])
                    .map_err(cipher_err)?;
                let hmac = *hmac;
                let sha1 = |k: &[u8], p: &[&[u8]]| hmac.sha1_hmac(k, p);
                Aes128CmSha1_80::rtp_hmac(sha1, auth, out, index, end);
                Ok(end + Aes128CmSha1_80::HMAC_TAG_LEN)
            }
            Cipher::Gcm128 { salt, enc } => {
                let iv = AeadAes128Gcm::rtp_iv(*salt, ssrc, (index >> 16) as u32, seq);
                let (head, body) = out.split_at_mut(hlen);
                let body = &mut body[..payload.len() + AeadAes128Gcm::TAG_LEN];
                enc.encrypt(&iv, head, payload, body).map_err(cipher_err)?;
                Ok(end + AeadAes128Gcm::TAG_LEN)
            }
            Cipher::Gcm256 { salt, enc } => {
                let iv = AeadAes256Gcm::rtp_iv(*salt, ssrc, (index >> 16) as u32, seq);
                let (head, body) = out.split_at_mut(hlen);
                let body = &mut body[..payload.len() + AeadAes256Gcm::TAG_LEN];
                enc.encrypt(&iv, head, payload, body).map_err(cipher_err)?;
                Ok(end + AeadAes256Gcm::TAG_LEN)
            }
        }
    }
}

/// This end's master key (`K` bytes) and master salt (`S` bytes) out of the keying material
/// (RFC 5764 §4.2: client key, server key, client salt, server salt; the DTLS client sends
/// with the client's).
fn split<const K: usize, const S: usize>(keys: &SrtpKeys) -> Result<([u8; K], [u8; S]), SrtpError> {
    let m = &keys.material;
    if m.len() != 2 * K + 2 * S {
        return Err(SrtpError::BadMaterial {
            profile: keys.profile.to_string(),
            got: m.len(),
            want: 2 * K + 2 * S,
        });
    }
    let (k, s) = if keys.active { (0, 0) } else { (K, S) };
    let mut master = [0u8; K];
    let mut salt = [0u8; S];
    master.copy_from_slice(&m[k..k + K]);
    salt.copy_from_slice(&m[2 * K + s..2 * K + s + S]);
    Ok((master, salt))
}

/// This end's RTP session key (`K` bytes) and salt (`S` bytes), and into `auth` when given its
/// authentication key (RFC 3711 §4.3.1, labels 0, 2 and 1), from the keying material.
fn session<const K: usize, const S: usize>(
    srtp: &dyn SrtpProvider,
    keys: &SrtpKeys,
    auth: Option<&mut [u8]>,
) -> Result<([u8; K], [u8; S]), SrtpError> {
    let (master, salt) = split::<K, S>(keys)?;
    let mut key = [0u8; K];
    let mut session_salt = [0u8; S];
    derive(srtp, &master, &salt, LABEL_RTP_CIPHER, &mut key);
    derive(srtp, &master, &salt, LABEL_RTP_SALT, &mut session_salt);
    if let Some(out) = auth {
        derive(srtp, &master, &salt, LABEL_RTP_AUTH, out);
    }
    Ok((key, session_salt))
}

/// Fills `out` with the session key of `label` (RFC 3711 §4.3.1 with key derivation rate 0,
/// §4.3.3's AES-CM PRF): AES-ECB under `master` of the blocks
/// `salt ⊕ (label at byte 7) ‖ counter`, the salt zero-padded to 14 bytes (RFC 7714 §11 for
/// the 12-byte salt). Keys of 16 or 32 bytes (AES-128 or AES-256).
fn derive(srtp: &dyn SrtpProvider, master: &[u8], salt: &[u8], label: u8, out: &mut [u8]) {
    let mut input = [0u8; 16];
    input[..salt.len()].copy_from_slice(salt);
    input[7] ^= label;
    let mut block = [0u8; 32];
    for (round, chunk) in out.chunks_mut(16).enumerate() {
        input[14..].copy_from_slice(&(round as u16).to_be_bytes());
        if master.len() == 32 {
            srtp.srtp_aes_256_ecb_round(master, &input, &mut block);
        } else {
            srtp.srtp_aes_128_ecb_round(master, &input, &mut block);
        }
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> std::sync::Arc<CryptoProvider> {
        super::super::srtp_keys::provider()
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn derives_rfc_3711_b3_session_keys() {
        // RFC 3711 Appendix B.3, key derivation test vectors.
        let p = provider();
        let master = hex("E1F97A0D3E018BE0D64FA32C06DE4139");
        let salt = hex("0EC675AD498AFEEBB6960B3AABE6");
        let mut key = [0u8; 16];
        derive(p.srtp_provider, &master, &salt, LABEL_RTP_CIPHER, &mut key);
        assert_eq!(key.to_vec(), hex("C61E7A93744F39EE10734AFE3FF7A087"));
        let mut s = [0u8; 14];
        derive(p.srtp_provider, &master, &salt, LABEL_RTP_SALT, &mut s);
        assert_eq!(s.to_vec(), hex("30CBBC08863D8C85D49DB34A9AE1"));
        let mut auth = [0u8; 20];
        derive(p.srtp_provider, &master, &salt, LABEL_RTP_AUTH, &mut auth);
        assert_eq!(
            auth.to_vec(),
            hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4")
        );
    }

    fn material(profile: SrtpProfile, len: usize, active: bool) -> SrtpKeys {
        SrtpKeys {
            material: (0..len as u8).collect(),
            profile,
            active,
        }
    }

    #[test]
    fn takes_this_ends_key_and_salt() {
        let passive = material(SrtpProfile::AEAD_AES_128_GCM, 56, false);
        let (k, s) = split::<16, 12>(&passive).unwrap();
        assert_eq!(k[0], 16, "the server's key follows the client's");
        assert_eq!(s[0], 32 + 12, "the server's salt follows the client's");
        let active = SrtpKeys {
            active: true,
            ..passive.clone()
        };
        let (k, s) = split::<16, 12>(&active).unwrap();
        assert_eq!((k[0], s[0]), (0, 32));
        let short = SrtpKeys {
            material: vec![0; 55],
            ..passive
        };
        assert!(matches!(
            split::<16, 12>(&short),
            Err(SrtpError::BadMaterial {
                got: 55,
                want: 56,
                ..
            })
        ));
    }

    /// Seals a packet and opens it again with an independent cipher of the receiving end's
    /// keys, for each profile: the header is left in clear, the payload comes back, the
    /// tag checks.
    #[test]
    fn sealed_packets_open_with_the_peers_keys() {
        let p = provider();
        let payload: Vec<u8> = (0..160u32).map(|i| (i * 7) as u8).collect();
        for (profile, len) in [
            (SrtpProfile::AES128_CM_SHA1_80, 60),
            (SrtpProfile::AEAD_AES_128_GCM, 56),
            (SrtpProfile::AEAD_AES_256_GCM, 88),
        ] {
            let keys = material(profile, len, false);
            let mut tx = SrtpSender::new(&keys, &p, 0xCAFE_F00D, 111, Some((4, "0"))).unwrap();
            let index = (3u64 << 16) | 0xFFF0;
            let mut buf = vec![0u8; tx.room(payload.len())];
            let n = tx.seal(index, 48_000, &payload, &mut buf).unwrap();
            let hlen = 20;
            assert_eq!(&buf[..2], &[0x90, 111]);
            assert_eq!(&buf[2..4], &0xFFF0u16.to_be_bytes());
            assert_ne!(&buf[hlen..hlen + payload.len()], &payload[..], "{profile}");
            let srtp = p.srtp_provider;
            let opened = match profile {
                SrtpProfile::AES128_CM_SHA1_80 => {
                    let mut a = [0u8; 20];
                    let (k, s) = session::<16, 14>(srtp, &keys, Some(&mut a)).unwrap();
                    assert_eq!(n, hlen + payload.len() + 10);
                    let sha1 = |k: &[u8], d: &[&[u8]]| p.sha1_hmac_provider.sha1_hmac(k, d);
                    let body = hlen + payload.len();
                    assert!(Aes128CmSha1_80::rtp_verify(
                        sha1,
                        &a,
                        &buf[..body],
                        index,
                        &buf[body..n]
                    ));
                    let mut dec = srtp.aes_128_cm_sha1_80().create_cipher(k, false);
                    let iv = Aes128CmSha1_80::rtp_iv(s, 0xCAFE_F00D, index);
                    let mut out = vec![0u8; payload.len() + 16];
                    dec.decrypt(&iv, &buf[hlen..body], &mut out).unwrap();
                    out.truncate(payload.len());
                    out
                }
                SrtpProfile::AEAD_AES_128_GCM => {
                    let (k, s) = session::<16, 12>(srtp, &keys, None).unwrap();
                    let mut dec = srtp.aead_aes_128_gcm().create_cipher(k, false);
                    let iv = AeadAes128Gcm::rtp_iv(s, 0xCAFE_F00D, 3, 0xFFF0);
                    let mut out = vec![0u8; payload.len()];
                    let got = dec.decrypt(&iv, &[&buf[..hlen]], &buf[hlen..n], &mut out);
                    assert_eq!(got.unwrap(), payload.len());
                    out
                }
                _ => {
                    let (k, s) = session::<32, 12>(srtp, &keys, None).unwrap();
                    let mut dec = srtp.aead_aes_256_gcm().create_cipher(k, false);
                    let iv = AeadAes256Gcm::rtp_iv(s, 0xCAFE_F00D, 3, 0xFFF0);
                    let mut out = vec![0u8; payload.len()];
                    // A flipped header bit fails the tag: the header is authenticated.
                    let mut bad = buf[..n].to_vec();
                    bad[1] ^= 1;
                    assert!(dec
                        .decrypt(&iv, &[&bad[..hlen]], &bad[hlen..n], &mut out)
                        .is_err());
                    let got = dec.decrypt(&iv, &[&buf[..hlen]], &buf[hlen..n], &mut out);
                    assert_eq!(got.unwrap(), payload.len());
                    out
                }
            };
            assert_eq!(opened, payload, "{profile}");
        }
    }

    #[test]
    fn refuses_short_buffers() {
        let p = provider();
        let keys = material(SrtpProfile::AEAD_AES_128_GCM, 56, true);
        let mut tx = SrtpSender::new(&keys, &p, 1, 111, None).unwrap();
        let mut buf = vec![0u8; tx.room(10) - 1];
        assert_eq!(tx.seal(1, 0, &[0u8; 10], &mut buf), Err(SrtpError::Header));
    }
}
