//! The transcoder thread of one mount: the mount's MP3 or AAC queue ([`QueueReader`]) is
//! demuxed and decoded by symphonia, resampled to 48 kHz by rubato when the source rate
//! differs, cut into 20 ms stereo frames ([`Framer`]), encoded by libopus (the `opus` crate)
//! and written as Ogg/Opus pages ([`OggOpus`]) to the transcoded feed's queue, which the WHEP
//! engines read like an Ogg/Opus mount's. No codec code of our own.
//!
//! Garbage never stops it: a packet the decoder refuses is replaced by as much silence, a demuxer that loses its
//! footing is opened again on the stream where it stands, a decoder that asks for a reset is
//! made anew; each kind of trouble is logged at most once per [`super::frames::LOG_INTERVAL`]
//! ([`LogLimit`]). It ends when the mount's feed ends (the feed's queue ends too, so viewers
//! follow the mount's fallback as they would from an Ogg mount) or when it is told to stop
//! (its last viewer left).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use rubato::{FftFixedIn, Resampler};
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{Decoder, DecoderOptions};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::{FormatOptions, FormatReader};
use symphonia::core::io::{MediaSourceStream, MediaSourceStreamOptions, ReadOnlySource};
use throng_proto::format::Format;

use super::frames::{
    to_stereo, Framer, LogLimit, OggOpus, CHANNELS, MAX_OPUS_PACKET, MAX_RTP_OPUS_PAYLOAD,
    OPUS_RATE,
};
use super::source::QueueReader;
use crate::mount::live::Mount;
use crate::mount::queue::QueueWriter;

/// Opus bit rate of the transcoded stream, in bits per second: transparent for stereo music
/// (RFC 7587 §7.1 puts fullband stereo music at 64 to 128 kbit/s).
pub const OPUS_BITRATE: i32 = 96_000;

/// Input frames per resampler call (at the source rate): about 23 ms at 44.1 kHz.
pub const RESAMPLE_CHUNK: usize = 1024;

/// Most samples (per channel) of silence put in place of one packet the decoder refused: an
/// MP3 frame is 1,152 samples, an AAC frame 1,024; a larger claimed duration is not believed.
pub const MAX_SILENCE: usize = 2048;

/// What the transcoder counted, logged when it ends.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Opus packets written.
    pub packets: u64,
    /// Source packets the decoder refused (skipped).
    pub decode_errors: u64,
    /// Times the demuxer was opened again after losing its footing.
    pub reopens: u64,
}

/// Why the thread could not go on.
#[derive(Debug, thiserror::Error)]
enum Stop {
    /// The stream ended (the mount's feed ended or the transcoder was stopped).
    #[error("end of stream")]
    End,
    /// libopus refused to set up an encoder.
    #[error("Opus encoder: {0}")]
    Encoder(#[from] opus::Error),
}

/// Runs the transcoder of `mount` (MP3 or AAC) into `out` until the mount's feed ends or
/// `stop` is set; the feed's queue is ended when it returns. `skipped`
/// (`throng_whep_transcode_skipped_total`) counts the packets the decoder refused and the
/// times the demuxer was opened again. Each Opus packet is `frame_samples` samples per channel
/// at 48 kHz long (one of [`super::frames::frame_samples`]'s).
pub fn run(
    mount: Arc<Mount>,
    mut out: QueueWriter,
    stop: Arc<AtomicBool>,
    skipped: Counter,
    frame_samples: usize,
) {
    let started = Instant::now();
    let mut counts = Counts::default();
    let result = transcode(
        &mount,
        &mut out,
        &stop,
        &mut counts,
        &skipped,
        frame_samples,
    );
    out.end();
    let why = match result {
        Err(Stop::End) | Ok(()) => "end of stream".to_owned(),
        Err(e) => e.to_string(),
    };
    tracing::info!(
        mount = %mount.name,
        packets = counts.packets,
        decode_errors = counts.decode_errors,
        reopens = counts.reopens,
        secs = started.elapsed().as_secs(),
        "transcoder stopped: {why}"
    );
}

/// The demuxer of `format` on `mss`.
fn open(
    format: Format,
    mss: MediaSourceStream,
) -> symphonia::core::errors::Result<Box<dyn FormatReader>> {
    use symphonia::default::formats::{AdtsReader, MpaReader};
    let opts = FormatOptions::default();
    Ok(match format {
        Format::Aac => Box::new(AdtsReader::try_new(mss, &opts)?),
        _ => Box::new(MpaReader::try_new(mss, &opts)?),
    })
}

/// The decoder of `reader`'s first track.
fn decoder(reader: &dyn FormatReader) -> symphonia::core::errors::Result<Box<dyn Decoder>> {
    let track = reader
        .default_track()
        .ok_or(SymphoniaError::Unsupported("no audio track"))?;
    symphonia::default::get_codecs().make(&track.codec_params, &DecoderOptions::default())
}

/// The 48 kHz side: resampling (when needed), framing and encoding into Ogg pages.
struct Encode {
    framer: Framer,
    /// The resampler and the source rate it was made for (`None` at 48 kHz).
    resampler: Option<(u32, FftFixedIn<f32>)>,
    /// Planar stereo input waiting for a whole resampler chunk.
    planar: [Vec<f32>; 2],
    encoder: opus::Encoder,
    ogg: OggOpus,
    headers: Arc<Bytes>,
    packet: Vec<u8>,
}

impl Encode {
    fn new(
        input_rate: u32,
        frame_samples: usize,
        out: &mut QueueWriter,
    ) -> Result<Encode, opus::Error> {
        let mut encoder =
            opus::Encoder::new(OPUS_RATE, opus::Channels::Stereo, opus::Application::Audio)?;
        encoder.set_bitrate(opus::Bitrate::Bits(OPUS_BITRATE))?;
        let pre_skip = u16::try_from(encoder.get_lookahead()?).unwrap_or(0);
        let mut ogg = OggOpus::new(rand::random(), pre_skip, input_rate);
        let headers = Arc::new(ogg.header_pages());
        out.push((*headers).clone(), true, Some(headers.clone()));
        Ok(Encode {
            framer: Framer::new(frame_samples),
            resampler: None,
            planar: [Vec::new(), Vec::new()],
            encoder,
            ogg,
            headers,
            packet: vec![0; MAX_OPUS_PACKET],
        })
    }

    /// Takes interleaved stereo samples at `rate` Hz; encodes every whole frame into `out`.
    fn push(&mut self, stereo: &[f32], rate: u32, out: &mut QueueWriter, counts: &mut Counts) {
        if rate == OPUS_RATE {
            self.resampler = None;
            self.framer.push(stereo, CHANNELS);
        } else {
            if self.resampler.as_ref().is_none_or(|(r, _)| *r != rate) {
                match FftFixedIn::<f32>::new(
                    rate as usize,
                    OPUS_RATE as usize,
                    RESAMPLE_CHUNK,
                    1,
                    CHANNELS,
                ) {
                    Ok(r) => self.resampler = Some((rate, r)),
                    Err(e) => {
                        tracing::warn!("transcoder: no resampler from {rate} Hz: {e}");
                        return;
                    }
                }
                self.planar.iter_mut().for_each(Vec::clear);
            }
            for frame in stereo.chunks_exact(CHANNELS) {
                self.planar[0].push(frame[0]);
                self.planar[1].push(frame[1]);
            }
            let Some((_, resampler)) = self.resampler.as_mut() else {
                return;
            };
            while self.planar[0].len() >= resampler.input_frames_next() {
                let n = resampler.input_frames_next();
                let input = [&self.planar[0][..n], &self.planar[1][..n]];
                match resampler.process(&input, None) {
                    Ok(outp) => self.framer.push_planar(&outp[0], Some(&outp[1])),
                    Err(e) => tracing::warn!("transcoder: resampling: {e}"),
                }
                self.planar.iter_mut().for_each(|c| {
                    c.drain(..n);
                });
            }
        }
        while let Some(frame) = self.framer.next_frame() {
            match self
                .encoder
                .encode_float(&frame, &mut self.packet[..MAX_RTP_OPUS_PAYLOAD])
            {
                Ok(len) => {
                    let page = self
                        .ogg
                        .audio_page(&self.packet[..len], self.framer.frame_samples() as u32);
                    out.push(page, false, Some(self.headers.clone()));
                    counts.packets += 1;
                }
                Err(e) => tracing::warn!("transcoder: Opus encoding: {e}"),
            }
        }
    }
}

/// The loop of [`run`].
fn transcode(
    mount: &Mount,
    out: &mut QueueWriter,
    stop: &Arc<AtomicBool>,
    counts: &mut Counts,
    skipped: &Counter,
    frame_samples: usize,
) -> Result<(), Stop> {
    let format = mount.settings.format;
    let source = QueueReader::new(mount.queue.clone(), stop.clone());
    let mut mss = Some(MediaSourceStream::new(
        Box::new(ReadOnlySource::new(source)),
        MediaSourceStreamOptions::default(),
    ));
    let mut demux_errors = LogLimit::default();
    let mut decode_errors = LogLimit::default();
    let mut reader: Option<Box<dyn FormatReader>> = None;
    let mut dec: Option<Box<dyn Decoder>> = None;
    let mut encode: Option<Encode> = None;
    let mut stereo: Vec<f32> = Vec::new();
    let mut samples: Option<SampleBuffer<f32>> = None;
    let mut last_rate: Option<u32> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(Stop::End);
        }
        let r = match reader.as_mut() {
            Some(r) => r,
            None => {
                let Some(m) = mss.take() else {
                    return Err(Stop::End);
                };
                match open(format, m) {
                    Ok(r) => {
                        dec = None;
                        reader.insert(r)
                    }
                    Err(SymphoniaError::IoError(_)) => return Err(Stop::End),
                    Err(e) => {
                        // The stream it was given is gone with the failed demuxer: a new one
                        // starts at the live edge.
                        if let Some(n) = demux_errors.hit(Instant::now()) {
                            tracing::warn!(mount = %mount.name, unlogged = n, "transcoder: the stream does not open as {}: {e}", format_name(format));
                        }
                        counts.reopens += 1;
                        skipped.inc();
                        let source = QueueReader::new(mount.queue.clone(), stop.clone());
                        mss = Some(MediaSourceStream::new(
                            Box::new(ReadOnlySource::new(source)),
                            MediaSourceStreamOptions::default(),
                        ));
                        continue;
                    }
                }
            }
        };
        if dec.is_none() {
            match decoder(r.as_ref()) {
                Ok(d) => dec = Some(d),
                Err(e) => {
                    if let Some(n) = demux_errors.hit(Instant::now()) {
                        tracing::warn!(mount = %mount.name, unlogged = n, "transcoder: no decoder: {e}");
                    }
                    mss = reader.take().map(FormatReader::into_inner);
                    counts.reopens += 1;
                    skipped.inc();
                    continue;
                }
            }
        }
        let packet = match r.next_packet() {
            Ok(p) => p,
            Err(SymphoniaError::IoError(_)) => return Err(Stop::End),
            Err(SymphoniaError::ResetRequired) => {
                dec = None;
                continue;
            }
            Err(e) => {
                if let Some(n) = demux_errors.hit(Instant::now()) {
                    tracing::warn!(mount = %mount.name, unlogged = n, "transcoder: demuxing: {e}");
                }
                counts.reopens += 1;
                skipped.inc();
                mss = reader.take().map(FormatReader::into_inner);
                continue;
            }
        };
        let Some(d) = dec.as_mut() else { continue };
        let decoded = match d.decode(&packet) {
            Ok(buf) => buf,
            Err(SymphoniaError::ResetRequired) => {
                dec = None;
                continue;
            }
            Err(SymphoniaError::IoError(_)) => return Err(Stop::End),
            Err(e) => {
                counts.decode_errors += 1;
                skipped.inc();
                if let Some(n) = decode_errors.hit(Instant::now()) {
                    tracing::warn!(mount = %mount.name, unlogged = n, "transcoder: a packet was skipped: {e}");
                }
                // Silence in its place, so the Opus stream keeps real time (a viewer's jitter
                // buffer would otherwise run dry by the length of every skipped packet).
                if let (Some(enc), Some(rate)) = (encode.as_mut(), last_rate) {
                    let frames = usize::try_from(packet.dur).unwrap_or(0).min(MAX_SILENCE);
                    stereo.clear();
                    stereo.resize(frames * CHANNELS, 0.0);
                    enc.push(&stereo, rate, out, counts);
                }
                continue;
            }
        };
        let spec = *decoded.spec();
        last_rate = Some(spec.rate);
        let channels = spec.channels.count();
        if decoded.frames() == 0 || channels == 0 {
            continue;
        }
        let sb = match samples.as_mut() {
            Some(sb) if sb.capacity() >= decoded.capacity() * channels => sb,
            _ => samples.insert(SampleBuffer::new(decoded.capacity() as u64, spec)),
        };
        sb.copy_interleaved_ref(decoded);
        stereo.clear();
        to_stereo(sb.samples(), channels, &mut stereo);
        let enc = match encode.as_mut() {
            Some(e) => e,
            None => encode.insert(Encode::new(spec.rate, frame_samples, out)?),
        };
        enc.push(&stereo, spec.rate, out, counts);
    }
}

/// The name of a format in log lines.
fn format_name(f: Format) -> &'static str {
    match f {
        Format::Aac => "AAC (ADTS)",
        _ => "MP3",
    }
}
