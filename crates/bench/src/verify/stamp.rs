//! The latency stamp of the bench's probe source (sans-IO): a 20 ms Opus packet that carries
//! its send time, so a listener that receives it knows its mouth-to-ear latency. The probe
//! stream around it (Ogg pages, `OpusHead`) is [`crate::whep::latency`]'s; WHEP viewers read
//! the stamp from each RTP payload, ICY listeners from each Ogg page ([`crate::verify::ogg`]).
//!
//! A stamped packet is [`TOC`] (a valid Opus TOC byte, RFC 6716 §3.1: config 31 = CELT
//! fullband 20 ms, mono, code 0 = one frame), then the 8-byte [`MAGIC`], then the send time in
//! µs since the Unix epoch on the run's clock (u64, little-endian), padded to [`PACKET_LEN`]
//! bytes (64 kbit/s).

/// The Opus TOC byte of every stamped packet: config 31 (CELT FB 20 ms), mono, one frame.
pub const TOC: u8 = 31 << 3;

/// Marks a stamped packet (after the TOC byte).
pub const MAGIC: [u8; 8] = *b"THRNGLAT";

/// Length of the stamp at the start of a packet (bytes): TOC, magic, send time.
pub const STAMP_LEN: usize = 1 + MAGIC.len() + 8;

/// Length of a stamped packet (bytes): the stamp padded with zeros to 160 bytes, the size of
/// a 64 kbit/s Opus packet of 20 ms, so the server moves as many bytes as for real audio (and
/// ICY write coalescing, which waits for bytes, behaves as it would).
pub const PACKET_LEN: usize = 160;

/// The Opus packet carrying send time `unix_us` (µs since the Unix epoch), [`PACKET_LEN`]
/// bytes.
pub fn stamp_packet(unix_us: u64) -> [u8; PACKET_LEN] {
    let mut p = [0u8; PACKET_LEN];
    p[0] = TOC;
    p[1..9].copy_from_slice(&MAGIC);
    p[9..STAMP_LEN].copy_from_slice(&unix_us.to_le_bytes());
    p
}

/// The send time of a stamped Opus packet (an RTP payload, or the start of an Ogg page's
/// first packet); `None` for any other packet.
pub fn read_stamp(packet: &[u8]) -> Option<u64> {
    if packet.len() < STAMP_LEN || packet[0] != TOC || packet[1..9] != MAGIC {
        return None;
    }
    Some(u64::from_le_bytes(packet[9..17].try_into().ok()?))
}
