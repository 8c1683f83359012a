//! TLS record sealing for listeners over HTTPS, done by the fan-out shards in user space (this
//! kernel has no kTLS). The connection task completes the handshake with rustls, then hands the
//! shard only the transmit traffic secret: an AEAD key, its IV and the next sequence number
//! ([`SealState`], well under 1 KiB), instead of a rustls connection with its buffers (tens of
//! KiB). Each write's coalesced bytes are sealed into as few application-data records as
//! possible (at most [`MAX_PLAINTEXT`] bytes of plaintext each, RFC 8446 §5.1) in a per-shard
//! scratch buffer; when the kernel takes only part, that listener keeps the unsent ciphertext
//! ([`TlsListener`]) and sends it before anything new. The record layout follows RFC 8446 §5.2
//! (TLS 1.3: header with the length of the ciphertext as additional data, inner content type
//! `0x17`, nonce = IV xor sequence number) and RFC 5246 §6.2.3.3 with RFC 5288 / RFC 7905
//! (TLS 1.2 AES-GCM: 8-byte explicit nonce; ChaCha20-Poly1305: none).

use std::io::{ErrorKind, IoSlice, Write};

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

/// Most plaintext bytes in one TLS record (RFC 8446 §5.1, RFC 5246 §6.2.1).
pub const MAX_PLAINTEXT: usize = 16 * 1024;

/// The AEAD tag length of every supported suite (bytes).
const TAG_LEN: usize = 16;

/// TLS content type of application data.
const APPLICATION_DATA: u8 = 0x17;

/// The protocol version the record sealer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

/// The AEAD of a negotiated cipher suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// AES-128-GCM.
    Aes128Gcm,
    /// AES-256-GCM.
    Aes256Gcm,
    /// ChaCha20-Poly1305.
    Chacha20Poly1305,
}

/// Why a sealing state could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key has the wrong length for the cipher.
    #[error("bad AEAD key for {0:?}")]
    BadKey(Cipher),
    /// The IV is not 12 bytes.
    #[error("IV is not 12 bytes")]
    BadIv,
    /// The negotiated suite or version cannot be sealed here.
    #[error("unsupported TLS suite or version")]
    Unsupported,
    /// rustls refused to give the secrets (secret extraction not enabled, or data pending).
    #[error("cannot extract the TLS secrets: {0}")]
    Extract(String),
}

/// The transmit direction of one TLS connection: key, IV and next record sequence number.
pub struct SealState {
    key: LessSafeKey,
    /// The raw key, kept to carry the state across a binary upgrade ([`SealExport`]).
    raw_key: [u8; 32],
    key_len: u8,
    iv: [u8; 12],
    seq: u64,
    version: TlsVersion,
    cipher: Cipher,
}

impl std::fmt::Debug for SealState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealState")
            .field("seq", &self.seq)
            .field("version", &self.version)
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl SealState {
    /// A sealer for `version` and `cipher` with traffic key `key`, IV `iv` (12 bytes) and next
    /// sequence number `seq`.
    ///
    /// Errors: [`SealError::BadKey`], [`SealError::BadIv`].
    pub fn new(
        version: TlsVersion,
        cipher: Cipher,
        key: &[u8],
        iv: &[u8],
        seq: u64,
    ) -> Result<SealState, SealError> {
        let alg = match cipher {
            Cipher::Aes128Gcm => &aead::AES_128_GCM,
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        let mut raw_key = [0u8; 32];
        raw_key
            .get_mut(..key.len())
            .ok_or(SealError::BadKey(cipher))?
            .copy_from_slice(key);
        let key_len = key.len() as u8;
        let key = UnboundKey::new(alg, key).map_err(|_| SealError::BadKey(cipher))?;
        let iv: [u8; 12] = iv.try_into().map_err(|_| SealError::BadIv)?;
        Ok(SealState {
            key: LessSafeKey::new(key),
            raw_key,
            key_len,
            iv,
            seq,
            version,
            cipher,
        })
    }

    /// Takes the transmit secrets of a finished rustls server handshake. Nothing may be
    /// pending in the connection (no session tickets: `send_tls13_tickets = 0`).
    ///
    /// Errors: [`SealError::Extract`] when rustls refuses (`enable_secret_extraction` off),
    /// [`SealError::Unsupported`] for a suite or version this sealer does not know.
    pub fn from_rustls(conn: rustls::ServerConnection) -> Result<SealState, SealError> {
        let version = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => TlsVersion::Tls13,
            Some(rustls::ProtocolVersion::TLSv1_2) => TlsVersion::Tls12,
            _ => return Err(SealError::Unsupported),
        };
        let secrets = conn
            .dangerous_extract_secrets()
            .map_err(|e| SealError::Extract(e.to_string()))?;
        let (seq, tx) = secrets.tx;
        use rustls::ConnectionTrafficSecrets as S;
        let (cipher, key, iv) = match &tx {
            S::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
            S::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
            S::Chacha20Poly1305 { key, iv } => (Cipher::Chacha20Poly1305, key, iv),
            _ => return Err(SealError::Unsupported),
        };
        SealState::new(version, cipher, key.as_ref(), iv.as_ref(), seq)
    }

    /// The sequence number of the next record.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Bytes a record adds around its plaintext (header, explicit nonce, inner type, tag).
    pub fn overhead(&self) -> usize {
        5 + TAG_LEN
            + match (self.version, self.cipher) {
                (TlsVersion::Tls13, _) => 1,
                (TlsVersion::Tls12, Cipher::Chacha20Poly1305) => 0,
                (TlsVersion::Tls12, _) => 8,
            }
    }

    /// Seals the concatenation of `parts` as application-data records of at most
    /// [`MAX_PLAINTEXT`] plaintext bytes each, appended to `out`, numbered from the current
    /// sequence number without consuming it; returns how many records were made. Call
    /// [`SealState::commit`] with that count once any of them went out.
    pub fn seal_into(&self, parts: &[&[u8]], out: &mut Vec<u8>) -> u64 {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let records = total.div_ceil(MAX_PLAINTEXT);
        out.reserve(total + records * self.overhead());
        let mut part = 0;
        let mut offset = 0;
        let mut left = total;
        let mut seq = self.seq;
        while left > 0 {
            let n = left.min(MAX_PLAINTEXT);
            let start = out.len();
            let inner = n + usize::from(self.version == TlsVersion::Tls13);
            let explicit =
                if self.version == TlsVersion::Tls12 && self.cipher != Cipher::Chacha20Poly1305 {
                    8
                } else {
                    0
                };
            let wire_len = explicit + inner + TAG_LEN;
            out.extend_from_slice(&[APPLICATION_DATA, 3, 3]);
            out.extend_from_slice(&(wire_len as u16).to_be_bytes());
            let nonce = self.nonce(seq);
            if explicit > 0 {
                out.extend_from_slice(&nonce[4..]);
            }
            let body = out.len();
            // Gather `n` bytes of plaintext from the parts.
            let mut want = n;
            while want > 0 {
                let p = parts[part];
                let take = (p.len() - offset).min(want);
                out.extend_from_slice(&p[offset..offset + take]);
                offset += take;
                want -= take;
                if offset == p.len() {
                    part += 1;
                    offset = 0;
                }
            }
            if self.version == TlsVersion::Tls13 {
                out.push(APPLICATION_DATA);
            }
            let aad = match self.version {
                TlsVersion::Tls13 => {
                    let mut a = [0u8; 13];
                    a[..5].copy_from_slice(&out[start..start + 5]);
                    (a, 5)
                }
                TlsVersion::Tls12 => {
                    let mut a = [0u8; 13];
                    a[..8].copy_from_slice(&seq.to_be_bytes());
                    a[8..11].copy_from_slice(&[APPLICATION_DATA, 3, 3]);
                    a[11..].copy_from_slice(&(n as u16).to_be_bytes());
                    (a, 13)
                }
            };
            let tag = self
                .key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(&aad.0[..aad.1]),
                    &mut out[body..],
                )
                .expect("a record is far below the AEAD's limit");
            out.extend_from_slice(tag.as_ref());
            seq += 1;
            left -= n;
        }
        records as u64
    }

    /// Records `records` sealed records as sent: the next one takes the following number.
    pub fn commit(&mut self, records: u64) {
        self.seq += records;
    }

    /// The nonce of record `seq`: the IV xor the big-endian sequence number (RFC 8446 §5.3).
    fn nonce(&self, seq: u64) -> [u8; 12] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }
}

/// A TLS listener's sealing state as a binary upgrade carries it to the new process (over the
/// hand-over's Unix socket, with the listener's descriptor).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SealExport {
    /// 12 for TLS 1.2, 13 for TLS 1.3.
    pub version: u8,
    /// 0 AES-128-GCM, 1 AES-256-GCM, 2 ChaCha20-Poly1305.
    pub cipher: u8,
    /// The traffic key.
    pub key: Vec<u8>,
    /// The IV.
    pub iv: [u8; 12],
    /// The next record number.
    pub seq: u64,
    /// Sealed bytes not yet sent.
    pub tail: Vec<u8>,
}

/// A listener over TLS as its shard keeps it: the sealing state and, only after a partial
/// write, the ciphertext the kernel has not taken yet.
#[derive(Debug)]
pub struct TlsListener {
    /// The transmit direction.
    pub seal: SealState,
    /// Sealed bytes still to send, before anything new (empty, unallocated, when caught up).
    tail: Vec<u8>,
}

impl TlsListener {
    /// A listener with nothing pending.
    pub fn new(seal: SealState) -> TlsListener {
        TlsListener {
            seal,
            tail: Vec::new(),
        }
    }

    /// The state to carry across a binary upgrade.
    pub fn export(&self) -> SealExport {
        let s = &self.seal;
        SealExport {
            version: match s.version {
                TlsVersion::Tls12 => 12,
                TlsVersion::Tls13 => 13,
            },
            cipher: match s.cipher {
                Cipher::Aes128Gcm => 0,
                Cipher::Aes256Gcm => 1,
                Cipher::Chacha20Poly1305 => 2,
            },
            key: s.raw_key[..usize::from(s.key_len)].to_vec(),
            iv: s.iv,
            seq: s.seq,
            tail: self.tail.clone(),
        }
    }

    /// The listener an upgrade carried over.
    ///
    /// Errors: [`SealError::Unsupported`] for an unknown version or cipher; as
    /// [`SealState::new`].
    pub fn import(e: SealExport) -> Result<TlsListener, SealError> {
        let version = match e.version {
            12 => TlsVersion::Tls12,
            13 => TlsVersion::Tls13,
            _ => return Err(SealError::Unsupported),
        };
        let cipher = match e.cipher {
            0 => Cipher::Aes128Gcm,
            1 => Cipher::Aes256Gcm,
            2 => Cipher::Chacha20Poly1305,
            _ => return Err(SealError::Unsupported),
        };
        Ok(TlsListener {
            seal: SealState::new(version, cipher, &e.key, &e.iv, e.seq)?,
            tail: e.tail,
        })
    }

    /// Whether sealed bytes wait for the socket.
    pub fn has_tail(&self) -> bool {
        !self.tail.is_empty()
    }

    /// Sends the pending ciphertext; true once nothing is pending (its buffer is then freed).
    ///
    /// Errors: the write's error other than `WouldBlock` (the listener must be closed).
    pub fn flush_tail<W: Write>(&mut self, mut w: W) -> std::io::Result<bool> {
        while !self.tail.is_empty() {
            match w.write(&self.tail) {
                Ok(0) => return Ok(false),
                Ok(n) if n == self.tail.len() => self.tail = Vec::new(),
                Ok(n) => {
                    self.tail.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// A writer that seals what it is given for one TLS listener and writes the records to `inner`.
/// A vectored write seals all its slices at once (as few records as possible) in `scratch`; it
/// reports every plaintext byte taken once any ciphertext went out (the rest waits in the
/// listener's tail), and `WouldBlock` when nothing did (nothing is consumed then).
#[derive(Debug)]
pub struct SealingWriter<'a, W> {
    /// The socket.
    pub inner: W,
    /// The listener's state.
    pub tls: &'a mut TlsListener,
    /// Scratch space for records, reused across listeners.
    pub scratch: &'a mut Vec<u8>,
}

impl<W: Write> Write for SealingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        if !self.tls.flush_tail(&mut self.inner)? {
            return Err(ErrorKind::WouldBlock.into());
        }
        let parts: smallvec::SmallVec<[&[u8]; 16]> = bufs.iter().map(|b| &b[..]).collect();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        self.scratch.clear();
        let records = self.tls.seal.seal_into(&parts, self.scratch);
        let sent = loop {
            match self.inner.write(self.scratch) {
                Ok(0) => return Err(ErrorKind::WouldBlock.into()),
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.tls.seal.commit(records);
        if sent < self.scratch.len() {
            self.tls.tail = self.scratch[sent..].to_vec();
        }
        if self.scratch.capacity() > 4 * MAX_PLAINTEXT * 20 {
            // A huge burst: do not keep its scratch for every later write.
            *self.scratch = Vec::new();
        }
        Ok(total)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
