#!/usr/bin/env bash
# Regenerates the synthetic audio assets from ffmpeg lavfi sources only (no
# third-party recordings, so no licensing questions):
#   assets/demo.mp3       16 s C-Am-F-G arpeggio over a soft pad, 64 kbit/s CBR
#                         MP3, 44.1 kHz stereo, no ID3 tag, no Xing/Info frame
#                         (file starts with an MPEG frame sync). Embedded in the
#                         throng binary and looped forever; the piece is rendered
#                         twice with echo and the 2nd pass kept, so the echo tail
#                         wraps around and the loop point is seamless.
#   assets/test-tone.opus 10 s Ogg/Opus, 48 kHz stereo, 48 kbit/s (tests)
#   assets/test-tone.aac  10 s ADTS AAC-LC, 44.1 kHz stereo, 64 kbit/s (tests)
# Each output is checked to decode without errors.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p assets

FF=(ffmpeg -hide_banner -loglevel error -nostdin -y)

# Chord c = floor(t/4) mod 4 : C, Am, F, G  (root/third/fifth in Hz, ld(1..3))
# Arpeggio: 16th notes (0.25 s), 8-step pattern r 3 5 2r 2*3 2r 5 3, plucked
# envelope forced to 0 at each note end (no clicks).  Pad: root an octave down
# plus third/fifth, swelling with sin(pi*(t mod 4)/4) -> 0 at chord changes.
C='st(0,mod(floor(t/4),4));'
C+='st(1,if(eq(ld(0),0),261.63,if(eq(ld(0),1),220.00,if(eq(ld(0),2),174.61,196.00))));'
C+='st(2,if(eq(ld(0),0),329.63,if(eq(ld(0),1),261.63,if(eq(ld(0),2),220.00,246.94))));'
C+='st(3,if(eq(ld(0),0),392.00,if(eq(ld(0),1),329.63,if(eq(ld(0),2),261.63,293.66))));'
C+='st(4,mod(floor(t*4),8));'
C+='st(5,if(eq(ld(4),0),ld(1),if(eq(ld(4),1),ld(2),if(eq(ld(4),2),ld(3),if(eq(ld(4),3),2*ld(1),if(eq(ld(4),4),2*ld(2),if(eq(ld(4),5),2*ld(1),if(eq(ld(4),6),ld(3),ld(2)))))))));'
C+='st(6,t*4-floor(t*4));'
C+='st(7,min(1,ld(6)*40)*exp(-3*ld(6))*(1-ld(6)));'
C+='st(8,ld(7)*(sin(2*PI*ld(5)*t)+0.25*sin(4*PI*ld(5)*t)));'
C+='st(9,sin(PI*mod(t,4)/4)*(sin(PI*ld(1)*t)+0.6*sin(2*PI*ld(2)*t)+0.6*sin(2*PI*ld(3)*t)));'
# stereo: arpeggio panned slightly left on even steps, right on odd steps
L="${C}0.22*ld(8)*(1-0.3*mod(ld(4),2))+0.12*ld(9)"
R="${C}0.22*ld(8)*(0.7+0.3*mod(ld(4),2))+0.12*ld(9)"

"${FF[@]}" -filter_complex \
  "aevalsrc=exprs='${L}|${R}':s=44100:d=32,aecho=0.8:0.5:375|750:0.25|0.12,atrim=start=16:end=32,asetpts=N/SR/TB,volume=3.0" \
  -c:a libmp3lame -b:a 64k -abr 0 -ar 44100 -ac 2 \
  -id3v2_version 0 -write_xing 0 -write_id3v1 0 -f mp3 assets/demo.mp3

"${FF[@]}" -filter_complex \
  "sine=f=440:r=48000:d=10,aformat=channel_layouts=stereo,volume=0.5,afade=t=in:d=0.2,afade=t=out:st=9.8:d=0.2" \
  -c:a libopus -b:a 48k -vbr off -ar 48000 -f ogg assets/test-tone.opus

"${FF[@]}" -filter_complex \
  "sine=f=440:r=44100:d=10,aformat=channel_layouts=stereo,volume=0.5,afade=t=in:d=0.2,afade=t=out:st=9.8:d=0.2" \
  -c:a aac -b:a 64k -ar 44100 -f adts assets/test-tone.aac

# --- checks ---------------------------------------------------------------
for f in assets/demo.mp3 assets/test-tone.opus assets/test-tone.aac; do
  errs=$(ffmpeg -hide_banner -nostdin -v error -i "$f" -f null - 2>&1 | wc -l)
  [ "$errs" -eq 0 ] || { echo "$f: $errs decode error lines" >&2; exit 1; }
done
head -c 2 assets/demo.mp3 | od -An -tx1 | grep -Eq '^ ff f[23ab]$' \
  || { echo "demo.mp3 does not start with an MPEG-1/2 layer III frame sync" >&2; exit 1; }
if head -c 200 assets/demo.mp3 | grep -aqE 'Xing|Info|LAME|ID3'; then
  echo "demo.mp3 has a Xing/Info/ID3 header" >&2; exit 1
fi
ls -l assets/demo.mp3 assets/test-tone.opus assets/test-tone.aac
