//! The DTLS-SRTP keying material of a viewer's session, kept for the engine's own SRTP sender
//! (`srtp_send.rs`).
//!
//! str0m derives its SRTP contexts from the material its DTLS instance exports (RFC 5764
//! §4.2) and keeps them private, so every packet it sends costs a str0m round. str0m's crypto
//! is pluggable (`RtcConfig::set_crypto_provider`): this file wraps the default DTLS provider
//! (aws-lc-rs) so that each session's DTLS instance, on handing str0m the keying material and
//! the SRTP profile it negotiated, also puts a copy in that session's [`KeySlot`]. Nothing
//! else changes: the handshake, the certificate, str0m's own SRTP and SRTCP are the wrapped
//! provider's. [`build_rtc`] is the one way in: it builds an `Rtc` and hands back its slot.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use str0m::config::DtlsCert;
use str0m::crypto::dtls::{
    DtlsImplError, DtlsInstance, DtlsOutput, DtlsProvider, DtlsVersion, ProtocolVersion,
    SrtpProfile,
};
use str0m::crypto::{CryptoError, CryptoProvider};
use str0m::{Rtc, RtcConfig};

/// What one DTLS handshake exported for SRTP.
#[derive(Clone, PartialEq, Eq)]
pub struct SrtpKeys {
    /// The exporter's output, RFC 5764 §4.2 layout: client key, server key, client salt,
    /// server salt (60 bytes for AES128_CM_SHA1_80, 56 for AEAD_AES_128_GCM, 88 for
    /// AEAD_AES_256_GCM).
    pub material: Vec<u8>,
    /// The profile the handshake settled on.
    pub profile: SrtpProfile,
    /// Whether this end was the DTLS client (it sends with the client's key and salt).
    pub active: bool,
}

impl std::fmt::Debug for SrtpKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key bytes.
        f.debug_struct("SrtpKeys")
            .field("material_len", &self.material.len())
            .field("profile", &self.profile)
            .field("active", &self.active)
            .finish()
    }
}

/// Where a session's DTLS instance leaves its keys (empty until the handshake completes).
#[derive(Debug, Default)]
pub struct KeySlot(Mutex<Option<SrtpKeys>>);

impl KeySlot {
    /// The keys exported so far (`None` before the handshake completed).
    pub fn get(&self) -> Option<SrtpKeys> {
        self.0.lock().ok().and_then(|k| k.clone())
    }

    fn set(&self, keys: SrtpKeys) {
        if let Ok(mut k) = self.0.lock() {
            *k = Some(keys);
        }
    }
}

thread_local! {
    /// The slot the next DTLS instance created on this thread reports to (set by
    /// [`build_rtc`] around the one `build` call that creates it).
    static PENDING: RefCell<Option<Arc<KeySlot>>> = const { RefCell::new(None) };
}

/// Builds an `Rtc` from `config` at `now` on the key-keeping crypto provider; its keys will be
/// in the slot returned.
pub fn build_rtc(config: RtcConfig, now: Instant) -> (Rtc, Arc<KeySlot>) {
    let slot = Arc::new(KeySlot::default());
    PENDING.with(|p| *p.borrow_mut() = Some(slot.clone()));
    let rtc = config.set_crypto_provider(provider()).build(now);
    PENDING.with(|p| p.borrow_mut().take());
    (rtc, slot)
}

/// The default provider (str0m's feature flags: aws-lc-rs) with its DTLS provider wrapped.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let inner = str0m::crypto::from_feature_flags();
            let dtls: &'static KeepingProvider = Box::leak(Box::new(KeepingProvider {
                inner: inner.dtls_provider,
            }));
            Arc::new(CryptoProvider {
                dtls_provider: dtls,
                ..inner
            })
        })
        .clone()
}

/// The wrapped DTLS provider.
#[derive(Debug)]
struct KeepingProvider {
    inner: &'static dyn DtlsProvider,
}

impl DtlsProvider for KeepingProvider {
    fn generate_certificate(&self) -> Option<DtlsCert> {
        self.inner.generate_certificate()
    }

    fn new_dtls(
        &self,
        cert: &DtlsCert,
        now: Instant,
        dtls_version: DtlsVersion,
        mtu: Option<usize>,
    ) -> Result<Box<dyn DtlsInstance>, CryptoError> {
        let inner = self.inner.new_dtls(cert, now, dtls_version, mtu)?;
        // An instance made outside `build_rtc` (none in this server) keeps its keys nowhere.
        let slot = PENDING
            .with(|p| p.borrow().clone())
            .unwrap_or_else(|| Arc::new(KeySlot::default()));
        Ok(Box::new(KeepingInstance { inner, slot }))
    }

    fn is_test(&self) -> bool {
        self.inner.is_test()
    }
}

/// A DTLS instance that copies the keying material it exports into its slot.
#[derive(Debug)]
struct KeepingInstance {
    inner: Box<dyn DtlsInstance>,
    slot: Arc<KeySlot>,
}

impl DtlsInstance for KeepingInstance {
    fn set_active(&mut self, active: bool) {
        self.inner.set_active(active);
    }

    fn handle_packet(&mut self, packet: &[u8]) -> Result<(), DtlsImplError> {
        self.inner.handle_packet(packet)
    }

    fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> DtlsOutput<'a> {
        let out = self.inner.poll_output(buf);
        if let DtlsOutput::KeyingMaterial(km, profile) = &out {
            self.slot.set(SrtpKeys {
                material: km.to_vec(),
                profile: *profile,
                active: self.inner.is_active(),
            });
        }
        out
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), DtlsImplError> {
        self.inner.handle_timeout(now)
    }

    fn send_application_data(&mut self, data: &[u8]) -> Result<(), DtlsImplError> {
        self.inner.send_application_data(data)
    }

    fn is_active(&self) -> bool {
        self.inner.is_active()
    }

    fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.inner.protocol_version()
    }

    fn is_closing(&self) -> bool {
        self.inner.is_closing()
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    fn close(&mut self) -> Result<(), DtlsImplError> {
        self.inner.close()
    }
}
