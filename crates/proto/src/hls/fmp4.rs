//! Fragmented MP4 (CMAF) HLS segments (RFC 8216bis section 3.1.2, ISO/IEC 23000-19), sans-IO:
//! the initialization section an `EXT-X-MAP` names ([`init_segment`]: `ftyp` and a `moov` with
//! one audio track and `mvex`) and the media segments ([`media_segment`]: an optional `emsg`,
//! then `moof` and `mdat`, one track fragment whose decode time is `tfdt`). The boxes are
//! written with the `mp4-atom` crate; this module only decides their contents.
//!
//! Sample entries, as each codec's ISOBMFF binding says:
//! - Opus: `Opus` with `dOps` ("Encapsulation of Opus in ISO Base Media File Format" 0.8.1,
//!   section 4.3: timescale 48 kHz, `dOps` from the Ogg `OpusHead` of RFC 7845 section 5.1);
//! - FLAC: `fLaC` with `dfLa` holding the STREAMINFO block ("Encapsulation of FLAC in ISO Base
//!   Media File Format" 0.0.4, section 3.3.2), timescale the sample rate;
//! - AAC: `mp4a` with `esds` holding the AudioSpecificConfig (ISO/IEC 14496-14 and -3), built
//!   from the ADTS header; samples are the raw data blocks without their ADTS header.
//!
//! Titles travel as timed metadata: an ID3 tag in an `emsg` box (version 1, absolute time in
//! the track's timescale) of scheme [`ID3_SCHEME`], as the AOM "Carriage of ID3 Timed Metadata
//! in the Common Media Application Format" says and hls.js reads (`FRAG_PARSING_METADATA`).

use mp4_atom::{
    Audio, Dfla, Dinf, Dops, Dref, DrefEntry, Emsg, EmsgTimestamp, Encode, Esds, FixedPoint, Flac,
    FlacMetadataBlock, Ftyp, Hdlr, Mdat, Mdhd, Mdia, Mfhd, Minf, Moof, Moov, Mp4a, Mvex, Mvhd,
    Opus, OpusChannelMapping, Smhd, Stbl, Stsd, Styp, Tfdt, Tfhd, Tkhd, Traf, Trak, Trex, Trun,
    TrunEntry, TrunSamples, Url,
};
use thiserror::Error;

/// The `emsg` scheme of ID3 timed metadata in CMAF (AOM ID3 in CMAF, section 3).
pub const ID3_SCHEME: &str = "https://aomedia.org/emsg/ID3";

/// The track ID of the one audio track.
pub const TRACK_ID: u32 = 1;

/// Errors building boxes or reading a codec's configuration.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Fmp4Error {
    /// The codec header is too short or malformed (`OpusHead`, the Ogg FLAC mapping header).
    #[error("malformed {0} header")]
    BadHeader(&'static str),
    /// `mp4-atom` refused to encode a box (a value out of its range).
    #[error("cannot encode box: {0}")]
    Encode(String),
}

impl From<mp4_atom::Error> for Fmp4Error {
    fn from(e: mp4_atom::Error) -> Fmp4Error {
        Fmp4Error::Encode(e.to_string())
    }
}

/// The codec configuration of the track, what its sample entry carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackCodec {
    /// Opus: the `dOps` box (the `OpusHead` fields).
    Opus(Dops),
    /// FLAC: the 34 bytes of the STREAMINFO metadata block (RFC 9639 section 8.2).
    Flac([u8; 34]),
    /// AAC: audio object type, sampling frequency index and channel configuration of the
    /// AudioSpecificConfig (ISO/IEC 14496-3 section 1.6.2.1).
    Aac {
        /// Audio object type (2: AAC LC).
        object_type: u8,
        /// Sampling frequency index (3: 48 kHz, 4: 44.1 kHz).
        freq_index: u8,
        /// Channel configuration (1: mono, 2: stereo).
        channels: u8,
    },
}

/// The one audio track of a stream: codec configuration, timescale and channel count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// The codec configuration.
    pub codec: TrackCodec,
    /// Ticks per second of the track's timestamps (the sample rate; 48,000 for Opus).
    pub timescale: u32,
    /// Channels.
    pub channels: u16,
}

impl Track {
    /// The track of an Ogg/Opus stream from its `OpusHead` packet (RFC 7845 section 5.1:
    /// version, channel count, pre-skip, input sample rate, output gain, mapping family and,
    /// for a family other than 0, its table).
    pub fn from_opus_head(p: &[u8]) -> Result<Track, Fmp4Error> {
        const WHAT: &str = "OpusHead";
        if p.len() < 19 || !p.starts_with(b"OpusHead") {
            return Err(Fmp4Error::BadHeader(WHAT));
        }
        let channels = p[9];
        let family = p[18];
        let channel_mapping = if family == 0 {
            None
        } else {
            let table = p
                .get(21..21 + usize::from(channels))
                .ok_or(Fmp4Error::BadHeader(WHAT))?;
            Some(OpusChannelMapping {
                family,
                stream_count: p[19],
                coupled_count: p[20],
                channel_mapping: table.to_vec(),
            })
        };
        Ok(Track {
            codec: TrackCodec::Opus(Dops {
                output_channel_count: channels,
                pre_skip: u16::from_le_bytes([p[10], p[11]]),
                input_sample_rate: u32::from_le_bytes([p[12], p[13], p[14], p[15]]),
                output_gain: i16::from_le_bytes([p[16], p[17]]),
                channel_mapping,
            }),
            timescale: 48_000,
            channels: u16::from(channels),
        })
    }

    /// The track of an Ogg FLAC stream from its first packet (the Ogg FLAC mapping:
    /// `0x7F "FLAC"`, version 1.0, header count, `"fLaC"`, then the STREAMINFO block with its
    /// 4-byte block header).
    pub fn from_ogg_flac_head(p: &[u8]) -> Result<Track, Fmp4Error> {
        const WHAT: &str = "Ogg FLAC";
        if !p.starts_with(b"\x7FFLAC") || p.get(9..13) != Some(b"fLaC") || p.get(13) != Some(&0) {
            return Err(Fmp4Error::BadHeader(WHAT));
        }
        let info: [u8; 34] = p
            .get(17..51)
            .and_then(|b| b.try_into().ok())
            .ok_or(Fmp4Error::BadHeader(WHAT))?;
        let rate =
            (u32::from(info[10]) << 12) | (u32::from(info[11]) << 4) | u32::from(info[12] >> 4);
        let channels = ((info[12] >> 1) & 7) + 1;
        if rate == 0 {
            return Err(Fmp4Error::BadHeader(WHAT));
        }
        Ok(Track {
            codec: TrackCodec::Flac(info),
            timescale: rate,
            channels: u16::from(channels),
        })
    }

    /// The track of an ADTS stream from a frame header (`profile` is the ADTS profile field,
    /// the audio object type minus one).
    pub fn from_adts(header: &crate::adts::AdtsHeader, freq_index: u8) -> Track {
        Track {
            codec: TrackCodec::Aac {
                object_type: header.profile + 1,
                freq_index,
                channels: header.channels,
            },
            timescale: header.sample_rate,
            channels: u16::from(header.channels.max(1)),
        }
    }

    /// The `CODECS` attribute value of this track (RFC 6381): `opus`, `fLaC`, `mp4a.40.<aot>`.
    pub fn codecs(&self) -> String {
        match &self.codec {
            TrackCodec::Opus(_) => "opus".to_owned(),
            TrackCodec::Flac(_) => "fLaC".to_owned(),
            TrackCodec::Aac { object_type, .. } => format!("mp4a.40.{object_type}"),
        }
    }

    fn sample_entry(&self) -> Result<mp4_atom::Codec, Fmp4Error> {
        // The sample entry's 16.16 rate field holds at most 65535 Hz.
        let audio = Audio {
            data_reference_index: 1,
            channel_count: self.channels,
            sample_size: 16,
            sample_rate: FixedPoint::new(u16::try_from(self.timescale).unwrap_or(0), 0),
        };
        Ok(match &self.codec {
            TrackCodec::Opus(dops) => Opus {
                audio,
                dops: dops.clone(),
                btrt: None,
            }
            .into(),
            TrackCodec::Flac(info) => Flac {
                audio,
                dfla: Dfla {
                    blocks: vec![stream_info_block(info)],
                },
            }
            .into(),
            TrackCodec::Aac {
                object_type,
                freq_index,
                channels,
            } => {
                use mp4_atom::esds::{DecoderConfig, DecoderSpecific, EsDescriptor, SLConfig};
                let asc = [
                    (object_type << 3) | (freq_index >> 1),
                    ((freq_index & 1) << 7) | (channels << 3),
                ];
                Mp4a {
                    audio,
                    esds: Esds {
                        es_desc: EsDescriptor {
                            es_id: 1,
                            dec_config: DecoderConfig {
                                object_type_indication: 0x40,
                                stream_type: 5,
                                up_stream: 0,
                                buffer_size_db: Default::default(),
                                max_bitrate: 0,
                                avg_bitrate: 0,
                                dec_specific: Some(DecoderSpecific {
                                    profile: *object_type,
                                    freq_index: *freq_index,
                                    chan_conf: *channels,
                                    raw: asc.to_vec(),
                                }),
                            },
                            sl_config: SLConfig::default(),
                            ..Default::default()
                        },
                    },
                    btrt: None,
                    taic: None,
                }
                .into()
            }
        })
    }
}

/// STREAMINFO's 34 bytes as `mp4-atom`'s block (RFC 9639 section 8.2 bit layout).
fn stream_info_block(b: &[u8; 34]) -> FlacMetadataBlock {
    let u24 = |o: usize| (u32::from(b[o]) << 16) | (u32::from(b[o + 1]) << 8) | u32::from(b[o + 2]);
    let packed = u64::from_be_bytes(b[10..18].try_into().expect("8 bytes"));
    FlacMetadataBlock::StreamInfo {
        minimum_block_size: u16::from_be_bytes([b[0], b[1]]),
        maximum_block_size: u16::from_be_bytes([b[2], b[3]]),
        minimum_frame_size: u24(4).try_into().unwrap_or_default(),
        maximum_frame_size: u24(7).try_into().unwrap_or_default(),
        sample_rate: (packed >> 44) as u32,
        num_channels_minus_one: ((packed >> 41) & 7) as u8,
        bits_per_sample_minus_one: ((packed >> 36) & 31) as u8,
        number_of_interchannel_samples: packed & 0xF_FFFF_FFFF,
        md5_checksum: b[18..34].to_vec(),
    }
}

/// The initialization section of `track` (`ftyp` with CMAF brands, then `moov`: `mvhd`, one
/// audio `trak` with an empty sample table, and `mvex`/`trex` announcing fragments).
pub fn init_segment(track: &Track) -> Result<Vec<u8>, Fmp4Error> {
    let mut out = Vec::with_capacity(800);
    Ftyp {
        major_brand: b"iso6".into(),
        minor_version: 0,
        compatible_brands: vec![b"iso6".into(), b"cmfc".into(), b"mp41".into()],
    }
    .encode(&mut out)?;
    Moov {
        mvhd: Mvhd {
            timescale: track.timescale,
            next_track_id: TRACK_ID + 1,
            ..Default::default()
        },
        mvex: Some(Mvex {
            mehd: None,
            trex: vec![Trex {
                track_id: TRACK_ID,
                default_sample_description_index: 1,
                ..Default::default()
            }],
        }),
        trak: vec![Trak {
            tkhd: Tkhd {
                track_id: TRACK_ID,
                enabled: true,
                in_movie: true,
                volume: FixedPoint::new(1, 0),
                ..Default::default()
            },
            mdia: Mdia {
                mdhd: Mdhd {
                    timescale: track.timescale,
                    language: "und".to_owned(),
                    ..Default::default()
                },
                hdlr: Hdlr {
                    handler: b"soun".into(),
                    name: "Throng audio".to_owned(),
                },
                minf: Minf {
                    smhd: Some(Smhd::default()),
                    dinf: Dinf {
                        dref: Dref {
                            entries: vec![DrefEntry::Url(Url {
                                location: String::new(),
                            })],
                        },
                    },
                    stbl: Stbl {
                        stsd: Stsd {
                            codecs: vec![track.sample_entry()?],
                        },
                        ..Default::default()
                    },
                    ..Default::default()
                },
            },
            ..Default::default()
        }],
        ..Default::default()
    }
    .encode(&mut out)?;
    Ok(out)
}

/// One sample (an Opus packet, a FLAC frame, an AAC raw data block) and its play time in
/// timescale ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The coded sample.
    pub data: &'a [u8],
    /// Play time in ticks of the track's timescale.
    pub duration: u32,
}

/// A timed ID3 tag for a media segment: an `emsg` (version 1) at `time` ticks of `timescale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedId3<'a> {
    /// The ID3v2 tag (message data).
    pub tag: &'a [u8],
    /// Event id: the same id is the same event (a player shows a repeated title once).
    pub id: u32,
}

/// Media segment number `sequence` (the `mfhd` sequence number, counting from 1): `styp`,
/// then, when `id3` is given, an `emsg` carrying it at the segment's start, then `moof`
/// (`tfhd` with base-is-moof, `tfdt` = `decode_time` ticks, one `trun` listing each sample's
/// duration and size) and `mdat` holding the samples back to back.
pub fn media_segment(
    sequence: u32,
    timescale: u32,
    decode_time: u64,
    samples: &[Sample<'_>],
    id3: Option<TimedId3<'_>>,
) -> Result<Vec<u8>, Fmp4Error> {
    let mut out = Vec::new();
    Styp {
        major_brand: b"msdh".into(),
        minor_version: 0,
        compatible_brands: vec![b"msdh".into(), b"msix".into(), b"cmfs".into()],
    }
    .encode(&mut out)?;
    out.extend(fragment(sequence, timescale, decode_time, samples, id3)?);
    Ok(out)
}

/// One fragment (a CMAF chunk): [`media_segment`] without its `styp`. A low-latency partial
/// segment is one fragment; its segment is the concatenation of its parts, the first with the
/// `styp`.
pub fn fragment(
    sequence: u32,
    timescale: u32,
    decode_time: u64,
    samples: &[Sample<'_>],
    id3: Option<TimedId3<'_>>,
) -> Result<Vec<u8>, Fmp4Error> {
    let payload: usize = samples.iter().map(|s| s.data.len()).sum();
    let mut out = Vec::with_capacity(payload + 200 + samples.len() * 8);
    if let Some(id3) = id3 {
        let duration: u64 = samples.iter().map(|s| u64::from(s.duration)).sum();
        Emsg {
            timescale,
            presentation_time: EmsgTimestamp::Absolute(decode_time),
            event_duration: u32::try_from(duration).unwrap_or(u32::MAX),
            id: id3.id,
            scheme_id_uri: ID3_SCHEME.to_owned(),
            value: String::new(),
            message_data: id3.tag.to_vec(),
        }
        .encode(&mut out)?;
    }
    let mut moof = Moof {
        mfhd: Mfhd {
            sequence_number: sequence,
        },
        traf: vec![Traf {
            tfhd: Tfhd {
                track_id: TRACK_ID,
                default_base_is_moof: true,
                ..Default::default()
            },
            tfdt: Some(Tfdt {
                base_media_decode_time: decode_time,
            }),
            trun: vec![Trun {
                data_offset: Some(0),
                samples: TrunSamples::Explicit(
                    samples
                        .iter()
                        .map(|s| TrunEntry {
                            duration: Some(s.duration),
                            size: Some(s.data.len() as u32),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }],
            ..Default::default()
        }],
    };
    // The data offset counts from the start of `moof` to the first sample, past the `mdat`
    // header: encode once to learn the size (the offset field is present either way).
    let mut sized = Vec::new();
    moof.encode(&mut sized)?;
    moof.traf[0].trun[0].data_offset =
        Some(i32::try_from(sized.len() + 8).map_err(|e| Fmp4Error::Encode(e.to_string()))?);
    moof.encode(&mut out)?;
    let mut data = Vec::with_capacity(payload);
    for s in samples {
        data.extend_from_slice(s.data);
    }
    Mdat { data }.encode(&mut out)?;
    Ok(out)
}

/// Play time of a FLAC frame in samples from its header (RFC 9639 section 9.1.1: the block
/// size code, with codes 6 and 7 reading an 8- or 16-bit value after the coded number);
/// `None` when `frame` does not start with a frame header.
pub fn flac_frame_samples(frame: &[u8]) -> Option<u32> {
    if frame.len() < 5 || frame[0] != 0xFF || frame[1] & 0xFE != 0xF8 {
        return None;
    }
    let code = frame[2] >> 4;
    match code {
        1 => Some(192),
        2..=5 => Some(576 << (code - 2)),
        8..=15 => Some(256 << (code - 8)),
        6 | 7 => {
            // The coded frame or sample number: UTF-8-like, 1 to 7 bytes.
            let lead = frame[4];
            let len = match lead.leading_ones() {
                0 => 1,
                n @ 2..=7 => n as usize,
                _ => return None,
            };
            let at = 4 + len;
            if code == 6 {
                Some(u32::from(*frame.get(at)?) + 1)
            } else {
                let b = frame.get(at..at + 2)?;
                Some(u32::from(u16::from_be_bytes([b[0], b[1]])) + 1)
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mp4_atom::{Any, Decode};

    fn opus_head(channels: u8) -> Vec<u8> {
        let mut p = b"OpusHead".to_vec();
        p.push(1);
        p.push(channels);
        p.extend_from_slice(&312u16.to_le_bytes());
        p.extend_from_slice(&44_100u32.to_le_bytes());
        p.extend_from_slice(&(-256i16).to_le_bytes());
        p.push(0);
        p
    }

    /// An Ogg FLAC first packet: 44.1 kHz stereo, 16 bits, block size 4096.
    fn ogg_flac_head() -> Vec<u8> {
        let mut p = b"\x7FFLAC\x01\x00\x00\x01fLaC".to_vec();
        p.extend_from_slice(&[0x00, 0x00, 0x00, 34]);
        let mut info = [0u8; 34];
        info[0..2].copy_from_slice(&4096u16.to_be_bytes());
        info[2..4].copy_from_slice(&4096u16.to_be_bytes());
        // 44100 Hz (20 bits), 2 channels (3 bits, minus one), 16 bits (5 bits, minus one),
        // 0 total samples (36 bits).
        let packed: u64 = (44_100u64 << 44) | (1 << 41) | (15 << 36);
        info[10..18].copy_from_slice(&packed.to_be_bytes());
        info[18..34].copy_from_slice(&[7; 16]);
        p.extend_from_slice(&info);
        p
    }

    fn boxes(mut b: &[u8]) -> Vec<Any> {
        let mut out = Vec::new();
        while !b.is_empty() {
            out.push(Any::decode(&mut b).expect("a box"));
        }
        out
    }

    fn the_codec(init: &[u8]) -> (mp4_atom::Codec, Moov) {
        let parsed = boxes(init);
        assert_eq!(parsed.len(), 2);
        assert!(matches!(parsed[0], Any::Ftyp(_)));
        let Any::Moov(moov) = &parsed[1] else {
            panic!("moov second")
        };
        assert_eq!(moov.mvex.as_ref().unwrap().trex[0].track_id, TRACK_ID);
        let trak = &moov.trak[0];
        assert_eq!(trak.tkhd.track_id, TRACK_ID);
        assert_eq!(trak.mdia.hdlr.handler, b"soun".into());
        (trak.mdia.minf.stbl.stsd.codecs[0].clone(), moov.clone())
    }

    #[test]
    fn opus_init_carries_dops_at_48_khz() {
        let track = Track::from_opus_head(&opus_head(2)).unwrap();
        assert_eq!(track.codecs(), "opus");
        let (codec, moov) = the_codec(&init_segment(&track).unwrap());
        assert_eq!(moov.trak[0].mdia.mdhd.timescale, 48_000);
        let mp4_atom::Codec::Opus(opus) = codec else {
            panic!("Opus entry: {codec:?}")
        };
        assert_eq!(opus.audio.channel_count, 2);
        assert_eq!(opus.dops.pre_skip, 312);
        assert_eq!(opus.dops.input_sample_rate, 44_100);
        assert_eq!(opus.dops.output_gain, -256);
        assert_eq!(opus.dops.channel_mapping, None);
        assert!(Track::from_opus_head(b"OpusHead\x01").is_err());
        assert!(Track::from_opus_head(&opus_head(2)[1..]).is_err());
    }

    #[test]
    fn opus_mapping_family_1_keeps_its_table() {
        let mut head = opus_head(3);
        *head.last_mut().unwrap() = 1;
        head.extend_from_slice(&[2, 1, 0, 2, 1]);
        let track = Track::from_opus_head(&head).unwrap();
        let TrackCodec::Opus(dops) = &track.codec else {
            panic!()
        };
        let m = dops.channel_mapping.as_ref().unwrap();
        assert_eq!((m.family, m.stream_count, m.coupled_count), (1, 2, 1));
        assert_eq!(m.channel_mapping, [0, 2, 1]);
        let (codec, _) = the_codec(&init_segment(&track).unwrap());
        let mp4_atom::Codec::Opus(opus) = codec else {
            panic!()
        };
        assert_eq!(&opus.dops, dops);
        // A table cut short is refused.
        assert!(Track::from_opus_head(&head[..head.len() - 1]).is_err());
    }

    #[test]
    fn flac_init_carries_streaminfo_in_dfla() {
        let track = Track::from_ogg_flac_head(&ogg_flac_head()).unwrap();
        assert_eq!((track.timescale, track.channels), (44_100, 2));
        assert_eq!(track.codecs(), "fLaC");
        let (codec, moov) = the_codec(&init_segment(&track).unwrap());
        assert_eq!(moov.trak[0].mdia.mdhd.timescale, 44_100);
        let mp4_atom::Codec::Flac(flac) = codec else {
            panic!("fLaC entry: {codec:?}")
        };
        let FlacMetadataBlock::StreamInfo {
            minimum_block_size,
            sample_rate,
            num_channels_minus_one,
            bits_per_sample_minus_one,
            md5_checksum,
            ..
        } = &flac.dfla.blocks[0]
        else {
            panic!("STREAMINFO first")
        };
        assert_eq!(*minimum_block_size, 4096);
        assert_eq!(*sample_rate, 44_100);
        assert_eq!(*num_channels_minus_one, 1);
        assert_eq!(*bits_per_sample_minus_one, 15);
        assert_eq!(md5_checksum, &[7; 16]);
        assert!(Track::from_ogg_flac_head(b"\x7FFLAC\x01\x00\x00\x01fLaX").is_err());
    }

    #[test]
    fn aac_init_carries_the_audio_specific_config() {
        let header = crate::adts::AdtsHeader {
            sample_rate: 44_100,
            channels: 2,
            profile: 1,
            frame_len: 100,
            samples: 1024,
        };
        let track = Track::from_adts(&header, 4);
        assert_eq!(track.codecs(), "mp4a.40.2");
        let (codec, _) = the_codec(&init_segment(&track).unwrap());
        let mp4_atom::Codec::Mp4a(mp4a) = codec else {
            panic!("mp4a entry: {codec:?}")
        };
        let spec = mp4a.esds.es_desc.dec_config.dec_specific.unwrap();
        assert_eq!((spec.profile, spec.freq_index, spec.chan_conf), (2, 4, 2));
        // AudioSpecificConfig: 00010 0100 0010 000 = 0x12 0x10.
        assert_eq!(&spec.raw[..2], &[0x12, 0x10]);
    }

    #[test]
    fn a_media_segment_lays_out_emsg_moof_and_mdat() {
        let samples = [
            Sample {
                data: &[1, 2, 3],
                duration: 960,
            },
            Sample {
                data: &[4, 5],
                duration: 480,
            },
        ];
        let tag = crate::hls::id3::title_tag("Artist - Song");
        let seg = media_segment(
            7,
            48_000,
            96_000,
            &samples,
            Some(TimedId3 { tag: &tag, id: 3 }),
        )
        .unwrap();
        let parsed = boxes(&seg);
        assert_eq!(parsed.len(), 4, "styp, emsg, moof, mdat");
        assert!(matches!(parsed[0], Any::Styp(_)));
        let Any::Emsg(emsg) = &parsed[1] else {
            panic!("emsg second")
        };
        assert_eq!(emsg.scheme_id_uri, ID3_SCHEME);
        assert_eq!(emsg.presentation_time, EmsgTimestamp::Absolute(96_000));
        assert_eq!(
            (emsg.timescale, emsg.event_duration, emsg.id),
            (48_000, 1440, 3)
        );
        assert_eq!(emsg.message_data, tag);
        let parsed_tag = crate::hls::id3::parse_tag(&emsg.message_data).unwrap();
        assert_eq!(parsed_tag.title.as_deref(), Some("Song"));
        let Any::Moof(moof) = &parsed[2] else {
            panic!("moof third")
        };
        assert_eq!(moof.mfhd.sequence_number, 7);
        let traf = &moof.traf[0];
        assert!(traf.tfhd.default_base_is_moof);
        assert_eq!(traf.tfdt.as_ref().unwrap().base_media_decode_time, 96_000);
        let TrunSamples::Explicit(entries) = &traf.trun[0].samples else {
            panic!()
        };
        let durs: Vec<_> = entries.iter().map(|e| (e.duration, e.size)).collect();
        assert_eq!(durs, [(Some(960), Some(3)), (Some(480), Some(2))]);
        let Any::Mdat(mdat) = &parsed[3] else {
            panic!("mdat last")
        };
        assert_eq!(mdat.data, [1, 2, 3, 4, 5]);
        // The data offset points at the first sample, counted from the start of `moof`.
        let moof_start = seg.len() - 8 - 5 - moof_len(&seg);
        let offset = traf.trun[0].data_offset.unwrap() as usize;
        assert_eq!(&seg[moof_start + offset..], &[1, 2, 3, 4, 5]);
        // Without a title: no emsg.
        let plain = media_segment(8, 48_000, 97_440, &samples, None).unwrap();
        assert_eq!(boxes(&plain).len(), 3);
    }

    /// The size of the `moof` box just before the trailing `mdat` of 5 bytes.
    fn moof_len(seg: &[u8]) -> usize {
        let mut at = 0;
        loop {
            let size = u32::from_be_bytes(seg[at..at + 4].try_into().unwrap()) as usize;
            if &seg[at + 4..at + 8] == b"moof" {
                return size;
            }
            at += size;
        }
    }

    #[test]
    fn flac_block_sizes_from_frame_headers() {
        // Fixed block size 4096 (code 12), 44.1 kHz (code 9), frame number 0.
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF8, 0xC9, 0x18, 0x00]),
            Some(4096)
        );
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF8, 0x19, 0x18, 0x00]),
            Some(192)
        );
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF8, 0x59, 0x18, 0x00]),
            Some(4608)
        );
        // Code 6: 8-bit (size - 1) after the coded number (here 2 bytes long).
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF9, 0x69, 0x18, 0xC2, 0x80, 99]),
            Some(100)
        );
        // Code 7: 16-bit (size - 1).
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF8, 0x79, 0x18, 0x05, 0x03, 0xE7]),
            Some(1000)
        );
        assert_eq!(flac_frame_samples(&[0xFF, 0xF8, 0x09, 0x18, 0x00]), None);
        assert_eq!(flac_frame_samples(b"fLaC\0"), None);
        assert_eq!(
            flac_frame_samples(&[0xFF, 0xF8, 0x79, 0x18, 0x05, 0x03]),
            None
        );
    }
}
