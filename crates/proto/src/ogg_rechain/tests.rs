//! Tests of the rechainer over real encoder output: `assets/test-tone.opus` (10 s Ogg/Opus from
//! ffmpeg's libopus, see `scripts/make-demo-audio.sh`) and `testdata/tone-vorbis.ogg`, made with
//! ffmpeg 5.1 and libvorbis:
//!
//! ```text
//! ffmpeg -f lavfi -i "sine=frequency=440:sample_rate=44100:duration=4" -ac 2 \
//!     -c:a libvorbis -q:a 1 -metadata title="Fixture Tone" -metadata artist="Throng" \
//!     crates/proto/testdata/tone-vorbis.ogg
//! ```
//!
//! (4 s of 44.1 kHz stereo Vorbis: a BOS page, a comment+setup page, four data pages.)

use super::*;
use crate::format::Format;
use crate::framer::Framer;
use crate::ogg::FLAG_BOS;
use crate::ogg::FLAG_CONTINUED;
use crate::ogg_comments::CommentKind;

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn opus_file() -> Vec<u8> {
    read("../../assets/test-tone.opus")
}

fn vorbis_file() -> Vec<u8> {
    read("testdata/tone-vorbis.ogg")
}

fn units(file: &[u8]) -> Vec<Unit> {
    let mut f = Framer::new(Format::Ogg);
    f.push(file);
    f.finish();
    std::iter::from_fn(|| f.next_unit())
        .map(|r| r.unwrap())
        .collect()
}

/// An owned copy of a page's fields.
#[derive(Debug, Clone)]
struct P {
    flags: u8,
    granule: u64,
    serial: u32,
    sequence: u32,
    segments: Vec<u8>,
    body: Vec<u8>,
}

fn pages(bytes: &[u8]) -> Vec<P> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let PageParse::Page(p) = parse_page(&bytes[pos..]) else {
            panic!("invalid page at {pos}")
        };
        out.push(P {
            flags: p.flags,
            granule: p.granule,
            serial: p.serial,
            sequence: p.sequence,
            segments: p.segments.to_vec(),
            body: p.body.to_vec(),
        });
        pos += p.bytes.len();
    }
    out
}

/// Whole packets of the pages, in order.
fn packets(pages: &[P]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for p in pages {
        let mut off = 0;
        for &l in &p.segments {
            cur.extend_from_slice(&p.body[off..off + l as usize]);
            off += l as usize;
            if l < 255 {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    out
}

/// Runs `units` through a rechainer, requesting `update` just before data unit number `at`
/// (counting data pages from 0). Returns the output units and the events.
fn run(
    units: &[Unit],
    requests: &[(usize, TagUpdate)],
) -> (Vec<Unit>, Vec<RechainEvent>, Rechainer) {
    let mut r = Rechainer::new(12345);
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut data = 0;
    for u in units {
        if u.kind == UnitKind::OggPage {
            for (at, upd) in requests {
                if *at == data {
                    r.request(upd.clone());
                }
            }
            data += 1;
        }
        events.extend(r.push(u.clone(), &mut |u| out.push(u)));
    }
    (out, events, r)
}

fn concat(units: &[Unit]) -> Vec<u8> {
    units.iter().flat_map(|u| u.data.iter().copied()).collect()
}

fn update(title: &str, artist: Option<&str>) -> TagUpdate {
    TagUpdate {
        title: title.into(),
        artist: artist.map(Into::into),
    }
}

#[test]
fn passes_streams_through_unchanged_and_reports_their_tags() {
    for (file, codec, title, artist) in [
        (opus_file(), "Opus", None, None),
        (
            vorbis_file(),
            "Vorbis",
            Some("Fixture Tone".to_string()),
            Some("Throng".to_string()),
        ),
    ] {
        let u = units(&file);
        let (out, events, r) = run(&u, &[]);
        assert_eq!(concat(&out), file, "byte-exact without a request");
        assert_eq!(
            out.iter().map(|u| u.kind).collect::<Vec<_>>(),
            u.iter().map(|u| u.kind).collect::<Vec<_>>()
        );
        assert_eq!(
            events,
            vec![RechainEvent::SourceChain {
                status: ChainStatus::Retaggable(codec),
                title,
                artist
            }]
        );
        assert_eq!(r.status(), ChainStatus::Retaggable(codec));
    }
}

/// Checks a rechained output: valid pages, the old chain ends with EOS where a packet ends,
/// each new chain starts with the original identification header and the new tags, keeps the
/// source's packets, and restarts its granules at the samples of its packets.
fn check_rechained(file: &[u8], out: &[Unit], updates: &[TagUpdate], vorbis: bool) {
    let src = pages(file);
    let bytes = concat(out);
    let got = pages(&bytes);
    let src_packets = packets(&src);
    let got_packets = packets(&got);
    let hdrs = if vorbis { 3 } else { 2 };
    // Split the output into chains at each BOS.
    let starts: Vec<usize> = got
        .iter()
        .enumerate()
        .filter(|(_, p)| p.flags & FLAG_BOS != 0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 1 + updates.len(), "one chain per update");
    let mut serials: Vec<u32> = starts.iter().map(|&i| got[i].serial).collect();
    serials.dedup();
    assert_eq!(serials.len(), starts.len(), "fresh serial per chain");
    // The audio packets, in order, are exactly the source's.
    let audio = |ps: &[Vec<u8>]| -> Vec<Vec<u8>> {
        let mut v = ps.to_vec();
        v.retain(|p| {
            !(p.starts_with(b"\x01vorbis")
                || p.starts_with(b"\x03vorbis")
                || p.starts_with(b"\x05vorbis")
                || p.starts_with(b"OpusHead")
                || p.starts_with(b"OpusTags"))
        });
        v
    };
    assert_eq!(audio(&got_packets), audio(&src_packets));
    for (c, &start) in starts.iter().enumerate() {
        let end = starts.get(c + 1).copied().unwrap_or(got.len());
        let chain = &got[start..end];
        let serial = chain[0].serial;
        for (seq, p) in chain.iter().enumerate() {
            assert_eq!(p.serial, serial, "one serial per chain");
            assert_eq!(p.sequence as usize, seq, "sequence restarts at 0");
        }
        if c + 1 < starts.len() {
            let last = chain.last().unwrap();
            assert!(last.flags & FLAG_EOS != 0, "chain {c} ends with EOS");
            assert!(
                *last.segments.last().unwrap() < 255,
                "cut where a packet ends"
            );
        }
        let cp = packets(chain);
        assert_eq!(cp[0], packets(&src[..1])[0], "identification header kept");
        if vorbis {
            assert_eq!(cp[2], packets(&src[..2])[2], "setup header kept");
        }
        let comment = CommentHeader::parse(&cp[1]).unwrap();
        assert_eq!(
            comment.kind,
            if vorbis {
                CommentKind::Vorbis
            } else {
                CommentKind::Opus
            }
        );
        let orig = CommentHeader::parse(&packets(&src[..2])[1]).unwrap();
        if c == 0 {
            assert_eq!(comment, orig);
            continue;
        }
        let upd = &updates[c - 1];
        assert_eq!(comment.get("title").as_deref(), Some(upd.title.as_str()));
        assert_eq!(comment.get("artist"), upd.artist);
        assert_eq!(comment.vendor, orig.vendor);
        assert_eq!(comment.get("encoder"), orig.get("encoder"), "others kept");
        // The first data page of the new chain starts a packet (no continuation).
        let first_data = (1..chain.len())
            .find(|&j| packets(&chain[..j]).len() >= hdrs)
            .unwrap();
        assert_eq!(chain[first_data].flags & FLAG_CONTINUED, 0);
    }
    // Data pages map one to one onto the source's; a new chain's granules are the source's
    // less the source granule of the old chain's last page.
    let src_data: Vec<&P> = src
        .iter()
        .filter(|p| p.flags & FLAG_BOS == 0 && p.granule != 0)
        .collect();
    let got_data: Vec<(usize, &P)> = got
        .iter()
        .enumerate()
        .filter(|(_, p)| p.flags & FLAG_BOS == 0 && p.granule != 0)
        .collect();
    assert_eq!(src_data.len(), got_data.len());
    let mut base = 0;
    let mut chain = 0;
    for (k, ((i, g), s)) in got_data.iter().zip(&src_data).enumerate() {
        let c = starts.iter().filter(|&&b| b <= *i).count() - 1;
        if c != chain {
            chain = c;
            base = src_data[k - 1].granule;
        }
        assert_eq!(g.body, s.body);
        assert_eq!(g.granule, s.granule - base, "chain {c}");
    }
    // Opus: the first page of a new chain claims exactly its packets' samples (the test tone
    // has 50 packets of 20 ms per page), pre-skip included.
    if !vorbis {
        for &b in &starts[1..] {
            assert_eq!(got[b + 2].granule, 48_000);
        }
    }
}

#[test]
fn opus_update_starts_a_new_chain() {
    let file = opus_file();
    let u = units(&file);
    let updates = [
        update("First Title", Some("Some Artist")),
        update("Artist - Second", None),
    ];
    let (out, events, _) = run(&u, &[(3, updates[0].clone()), (6, updates[1].clone())]);
    assert_eq!(
        &events[1..],
        &[
            RechainEvent::Applied(updates[0].clone()),
            RechainEvent::Applied(updates[1].clone())
        ]
    );
    check_rechained(&file, &out, &updates, false);
    // Header units of a new chain are marked so new listeners get them.
    let kinds: Vec<UnitKind> = out.iter().map(|u| u.kind).collect();
    let bos_at: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == UnitKind::OggHeader { new_chain: true })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(bos_at.len(), 3);
    for &i in &bos_at {
        assert_eq!(kinds[i + 1], UnitKind::OggHeader { new_chain: false });
        assert_eq!(kinds[i + 2], UnitKind::OggPage);
    }
    // Durations of data pages are kept for the chunker.
    let d_in: u64 = u.iter().map(|u| u.duration_us).sum();
    let d_out: u64 = out.iter().map(|u| u.duration_us).sum();
    assert_eq!(d_in, d_out);
}

#[test]
fn vorbis_update_starts_a_new_chain() {
    let file = vorbis_file();
    let u = units(&file);
    let updates = [update("Neue Weise", Some("Übermensch"))];
    let (out, events, _) = run(&u, &[(1, updates[0].clone())]);
    assert_eq!(events[1], RechainEvent::Applied(updates[0].clone()));
    check_rechained(&file, &out, &updates, true);
}

#[test]
fn update_requested_before_any_data_waits_for_a_data_page() {
    let file = vorbis_file();
    let u = units(&file);
    let mut r = Rechainer::new(1);
    r.request(update("Early", None));
    let mut out = Vec::new();
    let mut events = Vec::new();
    for x in &u {
        events.extend(r.push(x.clone(), &mut |u| out.push(u)));
    }
    assert!(!r.has_pending());
    assert!(matches!(events[1], RechainEvent::Applied(_)));
    check_rechained(&file, &out, &[update("Early", None)], true);
}

/// Chains built by hand: a BOS page per codec packet, `n` data pages of one 960-sample packet.
fn synthetic_chain(serial: u32, bos_packets: &[&[u8]], headers: &[&[u8]], n: u32) -> Vec<u8> {
    use crate::ogg::build_page;
    let mut s = Vec::new();
    for (i, p) in bos_packets.iter().enumerate() {
        s.extend(build_page(FLAG_BOS, 0, serial + i as u32, 0, p).unwrap());
    }
    for (i, h) in headers.iter().enumerate() {
        s.extend(build_page(0, 0, serial, 1 + i as u32, h).unwrap());
    }
    let seq0 = 1 + headers.len() as u32;
    for k in 0..n {
        s.extend(
            build_page(
                0,
                960 * (k as u64 + 1),
                serial,
                seq0 + k,
                &[0xF8, 0xFF, 0xFE],
            )
            .unwrap(),
        );
    }
    s
}

fn flac_bos() -> Vec<u8> {
    // "\x7fFLAC", mapping 1.0, 1 more header packet, "fLaC", STREAMINFO block header + 34 bytes
    // with 44100 Hz (0x0AC44 in 20 bits at byte 27).
    let mut p = b"\x7fFLAC\x01\x00\x00\x01fLaC\x00\x00\x00\x22".to_vec();
    p.resize(13 + 4 + 34, 0);
    p[27] = 0x0A;
    p[28] = 0xC4;
    p[29] = 0x40;
    p
}

#[test]
fn other_codecs_and_multiplexed_chains_are_not_retaggable() {
    let flac = synthetic_chain(10, &[&flac_bos()], &[b"\x84\0\0\x04tags"], 5);
    let u = units(&flac);
    let (out, events, r) = run(&u, &[(1, update("x", None))]);
    assert_eq!(concat(&out), flac, "unchanged");
    assert_eq!(r.status(), ChainStatus::NotRetaggable("FLAC".into()));
    assert_eq!(
        events,
        vec![
            RechainEvent::SourceChain {
                status: ChainStatus::NotRetaggable("FLAC".into()),
                title: None,
                artist: None
            },
            RechainEvent::Dropped("FLAC".into())
        ]
    );

    let head = opus_file();
    let ps = packets(&pages(&head)[..2]);
    let both = synthetic_chain(20, &[&ps[0], &flac_bos()], &[&ps[1]], 3);
    let (out, _, r) = run(&units(&both), &[]);
    assert_eq!(concat(&out), both);
    assert_eq!(
        r.status(),
        ChainStatus::NotRetaggable("Opus/FLAC: several logical streams".into())
    );
}

#[test]
fn a_source_chain_after_an_update_passes_through() {
    let file = opus_file();
    let mut twice = file.clone();
    twice.extend_from_slice(&file); // a chained file: the same serial again is allowed after EOS
    let u = units(&twice);
    let (out, events, r) = run(&u, &[(2, update("Mine", None))]);
    assert!(matches!(events[1], RechainEvent::Applied(_)));
    assert!(matches!(events[2], RechainEvent::SourceChain { .. }));
    let bytes = concat(&out);
    // The source's second chain is byte for byte what the source sent.
    assert!(bytes.ends_with(&file));
    assert_eq!(r.status(), ChainStatus::Retaggable("Opus"));
}
