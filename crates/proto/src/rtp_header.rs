//! The fixed RTP header (RFC 3550 §5.1) with an optional one-byte-header extension carrying
//! the BUNDLE `mid` (RFC 8285 §4.2, RFC 8843 §15.2), written in front of an Opus payload for a
//! WebRTC viewer. Sans-IO: [`RtpHeader::write`] fills a buffer; nothing here seals or sends.

/// RTP version 2 (RFC 3550 §5.1).
const VERSION: u8 = 2;

/// The "defined by profile" value of a one-byte-header extension block (RFC 8285 §4.2).
const ONE_BYTE_PROFILE: [u8; 2] = [0xBE, 0xDE];

/// Longest `mid` a one-byte-header element carries, in bytes (RFC 8285 §4.2: 1 to 16).
pub const MAX_MID_BYTES: usize = 16;

/// Longest header [`RtpHeader::write`] writes, in bytes: 12 fixed, 4 of extension header, and
/// the element (1 + 16) padded to 20.
pub const MAX_HEADER_BYTES: usize = 12 + 4 + 20;

/// One packet's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpHeader<'a> {
    /// Payload type (0 to 127; the session's Opus type, RFC 7587 §7).
    pub pt: u8,
    /// The marker bit (for audio: the first packet of a talkspurt, RFC 3551 §4.1).
    pub marker: bool,
    /// Sequence number (the low 16 bits of the sender's extended count).
    pub seq: u16,
    /// Media timestamp (48 kHz for Opus, RFC 7587 §4.1).
    pub ts: u32,
    /// Synchronization source.
    pub ssrc: u32,
    /// The BUNDLE `mid` and the extension id the session negotiated for it (1 to 14), or
    /// `None` for no extension.
    pub mid: Option<(u8, &'a [u8])>,
}

impl RtpHeader<'_> {
    /// The header's length in bytes (12, or 16 plus the padded `mid` element).
    pub fn len(&self) -> usize {
        match self.mid {
            None => 12,
            Some((_, mid)) => 16 + (1 + mid.len()).div_ceil(4) * 4,
        }
    }

    /// Whether the header is empty (never: it is at least 12 bytes).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header at the start of `buf`; its length, or `None` when `buf` is shorter
    /// than [`RtpHeader::len`], the payload type is over 127, or the `mid` element is invalid
    /// (an id outside 1 to 14, or a `mid` of 0 or over [`MAX_MID_BYTES`] bytes).
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let len = self.len();
        if buf.len() < len || self.pt > 127 {
            return None;
        }
        if let Some((id, mid)) = self.mid {
            if !(1..=14).contains(&id) || mid.is_empty() || mid.len() > MAX_MID_BYTES {
                return None;
            }
        }
        let ext = u8::from(self.mid.is_some()) << 4;
        buf[0] = (VERSION << 6) | ext;
        buf[1] = (u8::from(self.marker) << 7) | self.pt;
        buf[2..4].copy_from_slice(&self.seq.to_be_bytes());
        buf[4..8].copy_from_slice(&self.ts.to_be_bytes());
        buf[8..12].copy_from_slice(&self.ssrc.to_be_bytes());
        if let Some((id, mid)) = self.mid {
            let words = ((len - 16) / 4) as u16;
            buf[12..14].copy_from_slice(&ONE_BYTE_PROFILE);
            buf[14..16].copy_from_slice(&words.to_be_bytes());
            buf[16] = (id << 4) | (mid.len() as u8 - 1);
            buf[17..17 + mid.len()].copy_from_slice(mid);
            // Padding bytes are zero (RFC 8285 §4.2).
            buf[17 + mid.len()..len].fill(0);
        }
        Some(len)
    }
}

/// Sets the sequence number and timestamp of a header [`RtpHeader::write`] wrote in `header`
/// (bytes 2 to 8, RFC 3550 §5.1), so one header written per stream serves every packet.
///
/// Panics: `header` is shorter than 8 bytes.
pub fn stamp(header: &mut [u8], seq: u16, ts: u32) {
    header[2..4].copy_from_slice(&seq.to_be_bytes());
    header[4..8].copy_from_slice(&ts.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_header() {
        let h = RtpHeader {
            pt: 111,
            marker: true,
            seq: 0x1234,
            ts: 0xDEAD_BEEF,
            ssrc: 0x0102_0304,
            mid: None,
        };
        let mut buf = [0xFFu8; 40];
        assert_eq!(h.write(&mut buf), Some(12));
        assert_eq!(
            &buf[..12],
            &[
                0x80,
                0x80 | 111,
                0x12,
                0x34,
                0xDE,
                0xAD,
                0xBE,
                0xEF,
                1,
                2,
                3,
                4
            ]
        );
    }

    #[test]
    fn mid_extension_is_padded_to_words() {
        let h = RtpHeader {
            pt: 111,
            marker: false,
            seq: 1,
            ts: 2,
            ssrc: 3,
            mid: Some((4, b"0")),
        };
        let mut buf = [0xFFu8; 40];
        assert_eq!(h.len(), 20);
        assert_eq!(h.write(&mut buf), Some(20));
        assert_eq!(buf[0], 0x90, "version 2 with the extension bit");
        assert_eq!(&buf[12..20], &[0xBE, 0xDE, 0, 1, 0x40, b'0', 0, 0]);
        // Four bytes of mid and its id byte take two words.
        let h = RtpHeader {
            mid: Some((9, b"abcd")),
            ..h
        };
        assert_eq!(h.write(&mut buf), Some(24));
        assert_eq!(
            &buf[12..24],
            &[0xBE, 0xDE, 0, 2, 0x93, b'a', b'b', b'c', b'd', 0, 0, 0]
        );
    }

    #[test]
    fn a_stamped_header_is_the_one_written_with_those_numbers() {
        let h = RtpHeader {
            pt: 96,
            marker: false,
            seq: 0,
            ts: 0,
            ssrc: 9,
            mid: Some((3, b"audio")),
        };
        let mut template = [0u8; MAX_HEADER_BYTES];
        let n = h.write(&mut template).unwrap();
        stamp(&mut template[..n], 0xBEEF, 123_456);
        let mut direct = [0u8; MAX_HEADER_BYTES];
        let h = RtpHeader {
            seq: 0xBEEF,
            ts: 123_456,
            ..h
        };
        assert_eq!(h.write(&mut direct), Some(n));
        assert_eq!(template[..n], direct[..n]);
    }

    #[test]
    fn refuses_what_it_cannot_write() {
        let h = RtpHeader {
            pt: 111,
            marker: false,
            seq: 1,
            ts: 2,
            ssrc: 3,
            mid: None,
        };
        assert_eq!(h.write(&mut [0u8; 11]), None);
        assert_eq!(RtpHeader { pt: 128, ..h }.write(&mut [0u8; 12]), None);
        let mut buf = [0u8; 40];
        let long = [b'x'; 17];
        let cases: [(u8, &[u8], Option<usize>); 4] = [
            (15, b"0", None),
            (1, b"", None),
            (1, &long, None),
            (1, &long[..16], Some(MAX_HEADER_BYTES)),
        ];
        for (id, mid, want) in cases {
            let h = RtpHeader {
                mid: Some((id, mid)),
                ..h
            };
            assert_eq!(h.write(&mut buf), want, "id {id}, mid of {}", mid.len());
        }
    }
}
