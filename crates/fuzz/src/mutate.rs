//! Mutations of fuzz inputs: bit flips, byte sets to values parsers care about, inserts and
//! deletes of byte runs, splices with other corpus entries, truncation, and repeats of tokens
//! such as `\r\n`, `;`, `'` and `0xFF`. Several are stacked on one corpus entry per input.

use rand::rngs::StdRng;
use rand::Rng;

/// Bytes and tokens that parsers in this project treat specially.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b";",
    b"'",
    b"';",
    b"\xFF",
    b"\xFF\xFB",
    b"\xFF\xF1",
    b"\0",
    b":",
    b": ",
    b"=",
    b"&",
    b"%",
    b"%00",
    b"%2e%2e",
    b"?",
    b"/",
    b"\\",
    b" ",
    b"\"",
    b"<",
    b">",
    b"</",
    b"<!--",
    b"]]>",
    b"&amp;",
    b"[",
    b"]",
    b"[[",
    b"#",
    b"$",
    b"$apr1$",
    b"$2y$",
    b"{SHA}",
    b"OggS",
    b"OggS\0\x02",
    b"ID3\x04\0",
    b"OpusHead",
    b"OpusTags",
    b"\x01vorbis",
    b"\x03vorbis",
    b"StreamTitle='",
    b"HTTP/1.0 ",
    b"ICY 200 OK",
    b"\xC3",
    b"\xE2\x80\xAE",
    b"\x7F",
    b"0",
    b"-1",
    b"4294967295",
    b"18446744073709551616",
];

/// Boundary values written as single bytes.
const INTERESTING: &[u8] = &[
    0, 1, 0x7F, 0x80, 0xFE, 0xFF, b'\r', b'\n', b';', b'\'', b':',
];

/// Replaces `out` with a mutation of a random corpus entry, at most `max_len` bytes.
pub fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>], out: &mut Vec<u8>, max_len: usize) {
    out.clear();
    out.extend_from_slice(&corpus[rng.gen_range(0..corpus.len())]);
    let rounds = 1 + rng.gen_range(0..4u32) + if rng.gen_bool(0.2) { 8 } else { 0 };
    for _ in 0..rounds {
        mutate_once(rng, corpus, out);
    }
    out.truncate(max_len);
}

fn pos(rng: &mut StdRng, len: usize) -> usize {
    if len == 0 {
        0
    } else {
        rng.gen_range(0..=len)
    }
}

fn mutate_once(rng: &mut StdRng, corpus: &[Vec<u8>], out: &mut Vec<u8>) {
    let len = out.len();
    match rng.gen_range(0..12u32) {
        0 if len > 0 => {
            let i = rng.gen_range(0..len);
            out[i] ^= 1 << rng.gen_range(0..8);
        }
        1 if len > 0 => {
            let i = rng.gen_range(0..len);
            out[i] = INTERESTING[rng.gen_range(0..INTERESTING.len())];
        }
        2 if len > 0 => {
            let i = rng.gen_range(0..len);
            out[i] = rng.gen();
        }
        3 => {
            let i = pos(rng, len);
            let n = rng.gen_range(1..=16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            out.splice(i..i, bytes);
        }
        4 if len > 0 => {
            let i = rng.gen_range(0..len);
            let n = rng.gen_range(1..=(len - i).min(64));
            out.drain(i..i + n);
        }
        5 => {
            // Splice: a run of another entry in place of a run of this one.
            let other = &corpus[rng.gen_range(0..corpus.len())];
            if other.is_empty() {
                return;
            }
            let a = rng.gen_range(0..other.len());
            let b = rng.gen_range(a..=other.len());
            let i = pos(rng, len);
            let j = rng.gen_range(i..=len.min(i + 64));
            out.splice(i..j, other[a..b].iter().copied());
        }
        6 if len > 0 => {
            let n = rng.gen_range(0..len);
            out.truncate(n);
        }
        7 | 8 => {
            let tok = TOKENS[rng.gen_range(0..TOKENS.len())];
            let reps = if rng.gen_bool(0.1) {
                rng.gen_range(2..200)
            } else {
                1
            };
            let i = pos(rng, len);
            let ins: Vec<u8> = tok.iter().copied().cycle().take(tok.len() * reps).collect();
            out.splice(i..i, ins);
        }
        9 if len > 1 => {
            // Duplicate a run (repeated headers, repeated frames).
            let a = rng.gen_range(0..len);
            let b = rng.gen_range(a..=len.min(a + 512));
            let run: Vec<u8> = out[a..b].to_vec();
            let reps = rng.gen_range(1..8);
            let i = pos(rng, len);
            for _ in 0..reps {
                out.splice(i..i, run.iter().copied());
            }
        }
        10 if len >= 4 => {
            // Overwrite a little-endian or big-endian integer with a boundary value.
            let i = rng.gen_range(0..len - 3);
            let v: u32 = match rng.gen_range(0..4) {
                0 => 0,
                1 => u32::MAX,
                2 => rng.gen_range(0..1024),
                _ => rng.gen(),
            };
            let b = if rng.gen() {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            };
            out[i..i + 4].copy_from_slice(&b);
        }
        11 if len > 1 => {
            // Swap two bytes' positions (reorders tokens a little).
            let i = rng.gen_range(0..len);
            let j = rng.gen_range(0..len);
            out.swap(i, j);
        }
        _ => {
            let i = pos(rng, len);
            out.insert(i, INTERESTING[rng.gen_range(0..INTERESTING.len())]);
        }
    }
}
