//! Checks the record sealer against rustls itself: a rustls client that finished a handshake
//! with a rustls server must decrypt what [`SealState`] sealed with the server's extracted
//! secrets, for every suite and version the ring provider offers, across several records and
//! partial writes.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::crypto::ring as provider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

use super::*;

fn configs(
    suite: rustls::SupportedCipherSuite,
    version: &'static rustls::SupportedProtocolVersion,
) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
    let mut p = provider::default_provider();
    p.cipher_suites = vec![suite];
    let p = Arc::new(p);
    let mut server = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[version])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    server.enable_secret_extraction = true;
    server.send_tls13_tickets = 0;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// Moves every pending TLS byte from `from` to `to`.
fn pump(
    from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
) {
    let mut buf = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut buf).unwrap();
    }
    feed(to, &buf);
}

/// Gives `bytes` to `to`; returns the plaintext it decrypted.
fn feed(
    to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    mut bytes: &[u8],
) -> Vec<u8> {
    let mut plain = Vec::new();
    while !bytes.is_empty() {
        to.read_tls(&mut bytes).unwrap();
        to.process_new_packets().unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match to.reader().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => plain.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    plain
}

fn handshake(
    suite: rustls::SupportedCipherSuite,
    version: &'static rustls::SupportedProtocolVersion,
) -> (rustls::ServerConnection, rustls::ClientConnection) {
    let (sc, cc) = configs(suite, version);
    let mut server = rustls::ServerConnection::new(sc).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(cc, name).unwrap();
    for _ in 0..10 {
        pump(&mut client, &mut server);
        pump(&mut server, &mut client);
        if !client.is_handshaking() && !server.is_handshaking() && !server.wants_write() {
            break;
        }
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());
    (server, client)
}

fn all_cases() -> Vec<(
    rustls::SupportedCipherSuite,
    &'static rustls::SupportedProtocolVersion,
)> {
    // The test certificate is ECDSA: TLS 1.2 suites for RSA certificates cannot be used.
    provider::ALL_CIPHER_SUITES
        .iter()
        .filter(|s| {
            format!("{:?}", s.suite()).contains("TLS13")
                || format!("{:?}", s.suite()).contains("ECDSA")
        })
        .map(|s| {
            let v = match s {
                rustls::SupportedCipherSuite::Tls13(_) => &rustls::version::TLS13,
                _ => &rustls::version::TLS12,
            };
            (*s, v)
        })
        .collect()
}

#[test]
fn rustls_client_decrypts_sealed_records_of_every_suite() {
    let cases = all_cases();
    assert!(cases.len() >= 5, "{cases:?}");
    for (suite, version) in cases {
        let (server, mut client) = handshake(suite, version);
        let mut seal = SealState::from_rustls(server).unwrap();
        let big: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        let n = seal.seal_into(&[b"HTTP/1.0 200 OK\r\n\r\n", &big, b"end"], &mut out);
        assert_eq!(n, 3, "{suite:?}: 40,022 bytes make 3 records");
        seal.commit(n);
        let got = feed(&mut client, &out);
        let mut want = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"end");
        assert_eq!(got, want, "{suite:?}");
        // The next write continues the record numbers.
        out.clear();
        let n = seal.seal_into(&[b"more"], &mut out);
        seal.commit(n);
        assert_eq!(out.len(), 4 + seal.overhead());
        assert_eq!(feed(&mut client, &out), b"more", "{suite:?}");
    }
}

/// A socket taking at most `cap` bytes per write.
struct Capped {
    cap: usize,
    out: Vec<u8>,
}

impl Write for &mut Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.cap);
        if n == 0 && !buf.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn partial_writes_keep_the_tail_and_send_it_first() {
    let (suite, version) = all_cases()[0];
    let (server, mut client) = handshake(suite, version);
    let mut tls = TlsListener::new(SealState::from_rustls(server).unwrap());
    let mut scratch = Vec::new();
    let mut sock = Capped {
        cap: 0,
        out: Vec::new(),
    };
    // Nothing taken: WouldBlock, and nothing consumed (the record number is unchanged).
    let mut w = SealingWriter {
        inner: &mut sock,
        tls: &mut tls,
        scratch: &mut scratch,
    };
    let e = w.write_vectored(&[IoSlice::new(b"first")]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    assert_eq!(tls.seal.seq(), 0);
    // Part taken: all plaintext counts as written, the rest of the record waits.
    sock.cap = 7;
    let mut w = SealingWriter {
        inner: &mut sock,
        tls: &mut tls,
        scratch: &mut scratch,
    };
    assert_eq!(
        w.write_vectored(&[IoSlice::new(b"first"), IoSlice::new(b" second")])
            .unwrap(),
        12
    );
    assert!(tls.has_tail());
    // The next write sends the tail first; a full socket in between changes nothing.
    sock.cap = 0;
    assert!(!tls.flush_tail(&mut sock).unwrap());
    sock.cap = 1 << 20;
    let mut w = SealingWriter {
        inner: &mut sock,
        tls: &mut tls,
        scratch: &mut scratch,
    };
    assert_eq!(w.write(b" third").unwrap(), 6);
    assert!(!tls.has_tail());
    assert_eq!(feed(&mut client, &sock.out), b"first second third");
    // Carried across an upgrade (a tail pending): the client reads on without a break.
    sock.out.clear();
    sock.cap = 5;
    let mut w = SealingWriter {
        inner: &mut sock,
        tls: &mut tls,
        scratch: &mut scratch,
    };
    assert_eq!(w.write(b" fourth").unwrap(), 7);
    let mut moved = TlsListener::import(tls.export()).unwrap();
    assert!(moved.has_tail());
    sock.cap = 1 << 20;
    let mut w = SealingWriter {
        inner: &mut sock,
        tls: &mut moved,
        scratch: &mut scratch,
    };
    assert_eq!(w.write(b" fifth").unwrap(), 6);
    assert_eq!(feed(&mut client, &sock.out), b" fourth fifth");
}
