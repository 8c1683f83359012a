//! The fuzz targets: one per parser that reads bytes from the network or from files. Each is a
//! function over an arbitrary input that must neither panic nor hang, and that asserts the
//! invariants cheap to check (a framer never returns more bytes than it was given; a parsed head
//! serialised again parses the same; a built ICY block is well formed). Targets that feed
//! streams cut the input into pieces of sizes derived from the input itself, so an input file
//! alone reproduces a crash.

use std::path::Path;

use throng_proto::format::Format;
use throng_proto::framer::{FrameError, Framer, Unit};
use throng_proto::ogg::{self, PageParse};

/// One fuzz target.
#[derive(Debug)]
pub struct Target {
    /// Name on the command line and corpus directory name.
    pub name: &'static str,
    /// Runs one input; panics on a bug.
    pub run: fn(&[u8]),
    /// Built-in seed inputs (used with the files in `corpus/<name>/`).
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, in the order `all` runs them.
pub static TARGETS: &[Target] = &[
    Target {
        name: "http_request",
        run: http_request,
        seeds: seeds_http_request,
    },
    Target {
        name: "http_response",
        run: http_response,
        seeds: seeds_http_response,
    },
    Target {
        name: "basic_auth",
        run: basic_auth,
        seeds: seeds_basic_auth,
    },
    Target {
        name: "url_auth",
        run: url_auth,
        seeds: seeds_url_auth,
    },
    Target {
        name: "icy",
        run: icy,
        seeds: seeds_icy,
    },
    Target {
        name: "framer_mp3",
        run: framer_mp3,
        seeds: seeds_mp3,
    },
    Target {
        name: "framer_adts",
        run: framer_adts,
        seeds: seeds_adts,
    },
    Target {
        name: "framer_ogg",
        run: framer_ogg,
        seeds: seeds_ogg,
    },
    Target {
        name: "ogg_comments",
        run: ogg_comments,
        seeds: seeds_ogg_comments,
    },
    Target {
        name: "ogg_rechain",
        run: ogg_rechain,
        seeds: seeds_ogg_small,
    },
    Target {
        name: "htpasswd",
        run: htpasswd,
        seeds: seeds_htpasswd,
    },
    Target {
        name: "shoutcast",
        run: shoutcast,
        seeds: seeds_shoutcast,
    },
    Target {
        name: "listener_head",
        run: listener_head,
        seeds: seeds_http_request,
    },
    Target {
        name: "icecast_xml",
        run: icecast_xml,
        seeds: seeds_icecast_xml,
    },
    Target {
        name: "toml_config",
        run: toml_config,
        seeds: seeds_toml,
    },
    Target {
        name: "proxy_protocol",
        run: proxy_protocol,
        seeds: seeds_proxy_protocol,
    },
    Target {
        name: "hls_playlist",
        run: hls_playlist,
        seeds: seeds_hls_playlist,
    },
];

/// A tiny deterministic generator seeded from the input, for piece sizes and choices that must
/// follow from the input alone.
struct Split(u64);

impl Split {
    fn new(data: &[u8]) -> Split {
        // FNV-1a of the input.
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in data {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Split(h | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A piece size: mostly small, sometimes large.
    fn piece(&mut self) -> usize {
        match self.next() % 4 {
            0 => 1 + (self.next() % 4) as usize,
            1 => 1 + (self.next() % 64) as usize,
            2 => 1 + (self.next() % 1500) as usize,
            _ => 1 + (self.next() % 20_000) as usize,
        }
    }
}

/// Lossy UTF-8 text of the input (most text parsers take `&str`).
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

fn serialise_request(h: &throng_proto::http::RequestHead) -> Vec<u8> {
    let version = if h.ice_protocol {
        "ICE/1.0".to_owned()
    } else {
        format!("HTTP/1.{}", h.minor_version)
    };
    let mut out = format!("{} {} {version}\r\n", h.method, h.target);
    for (k, v) in &h.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// HTTP request heads (every client's first bytes): parse; a parsed head re-serialised parses
/// to the same head; the head's length is within the input.
fn http_request(data: &[u8]) {
    use throng_proto::http::parse_request_head;
    let Ok(Some((head, len))) = parse_request_head(data) else {
        return;
    };
    assert!(
        len <= data.len(),
        "head length {len} > input {}",
        data.len()
    );
    let _ = head.request_line();
    let _ = throng_proto::http::parse_query(head.query.as_deref().unwrap_or(""));
    let _ = throng_proto::source_info::SourceInfo::from_headers(&head.headers);
    for v in head
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("x-forwarded-for"))
    {
        let _ = throng_proto::forwarded::parse_entry(v.1.as_str());
    }
    if let Some(a) = head.header("authorization") {
        let _ = throng_proto::auth::parse_basic(a);
    }
    let again = serialise_request(&head);
    match parse_request_head(&again) {
        Ok(Some((h2, l2))) => {
            assert_eq!(l2, again.len(), "re-serialised head length");
            assert_eq!(h2, head, "re-serialised head parses differently");
        }
        other => {
            // A head that parsed once must parse again, unless re-serialising made it longer
            // than the head limit (Latin-1 header bytes become two UTF-8 bytes).
            if again.len() <= throng_proto::http::MAX_HEAD_BYTES {
                panic!("re-serialised head does not parse: {other:?}");
            }
        }
    }
}

/// HTTP response heads (relay upstreams, URL-auth callbacks, the load generator).
fn http_response(data: &[u8]) {
    use throng_proto::http::parse_response_head;
    let Ok(Some((head, len))) = parse_response_head(data) else {
        return;
    };
    assert!(
        len <= data.len(),
        "head length {len} > input {}",
        data.len()
    );
    let mut again = format!("{} {:03} {}\r\n", head.version, head.status, head.reason);
    for (k, v) in &head.headers {
        again.push_str(&format!("{k}: {v}\r\n"));
    }
    again.push_str("\r\n");
    match parse_response_head(again.as_bytes()) {
        Ok(Some((h2, l2))) => {
            assert_eq!(l2, again.len());
            assert_eq!(h2.status, head.status);
            assert_eq!(h2.headers, head.headers, "re-serialised headers differ");
        }
        other => {
            if again.len() <= throng_proto::http::MAX_HEAD_BYTES {
                panic!("re-serialised head does not parse: {other:?}");
            }
        }
    }
    let rules = throng_proto::url_auth::ReplyRules::default();
    let _ = rules.judge(&head.headers);
}

/// `Authorization: Basic` values: parse; credentials re-encoded parse the same.
fn basic_auth(data: &[u8]) {
    use throng_proto::auth::{basic_authorization, parse_basic};
    let value = throng_proto::http::decode_text(data);
    if let Some(c) = parse_basic(&value) {
        let again = basic_authorization(&c.user, &c.password);
        assert_eq!(
            parse_basic(&again),
            Some(c),
            "re-encoded credentials differ"
        );
    }
}

/// URL authentication: callback URLs from the config, reply headers from the callback server,
/// and the form bodies built from listener-controlled values (escaped values decode back).
fn url_auth(data: &[u8]) {
    use throng_proto::url_auth::{escape, CallbackUrl, ReplyRules};
    let s = text(data);
    if let Ok(u) = CallbackUrl::parse(&s) {
        assert!(u.path.starts_with('/'), "callback path {:?}", u.path);
    }
    let mut lines = s.split('\n');
    let a = lines.next();
    let b = lines.next();
    let rules = ReplyRules::new(a, b);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect();
    let _ = rules.judge(&headers);
    let esc = escape(&s);
    let back = throng_proto::http::parse_query(&format!("v={esc}"));
    assert_eq!(back.len(), 1, "escaped value splits: {esc:?}");
    assert_eq!(back[0].1, s, "escaped value does not decode back");
}

/// Inline ICY metadata from sources and relays: the first two bytes choose `icy-metaint`, the
/// rest is fed in pieces; audio out never exceeds bytes in; titles and blocks built from them
/// are well formed.
fn icy(data: &[u8]) {
    use throng_proto::icy::{metadata_block, stream_title, stream_url, IcyDemuxer, IcyPiece};
    if data.len() < 2 {
        return;
    }
    let metaint = 1 + (u16::from_le_bytes([data[0], data[1]]) as usize % 16_000);
    let body = &data[2..];
    let mut d = IcyDemuxer::new(metaint);
    let mut split = Split::new(data);
    let mut audio = 0usize;
    let mut blocks = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = split.piece().min(rest.len());
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        let r = d.feed(piece, |p| match p {
            IcyPiece::Audio(a) => audio += a.len(),
            IcyPiece::Metadata(m) => blocks.push(m),
        });
        if r.is_err() {
            break;
        }
        // Carrying the state (binary upgrade) must not change anything.
        d = IcyDemuxer::from_state(d.state());
    }
    assert!(audio <= body.len(), "audio {audio} > input {}", body.len());
    for m in blocks.iter().chain(std::iter::once(&body.to_vec())) {
        let title = stream_title(m);
        let url = stream_url(m);
        let block = metadata_block(title.as_deref().unwrap_or(""), url.as_deref());
        assert_eq!(block.len(), 1 + block[0] as usize * 16, "block length byte");
        assert!(block.len() <= 1 + 255 * 16);
        let payload = &block[1..];
        assert!(stream_title(payload).is_some(), "built block has no title");
        assert!(
            !payload
                .iter()
                .rev()
                .skip_while(|&&b| b == 0)
                .any(|&b| b == 0 || (b < 0x20 && b != b'\t')),
            "control character inside a built block: {payload:?}"
        );
    }
}

/// Feeds `data` to a framer for `format` in pieces; checks that the bytes of units plus the
/// garbage reported plus the unconsumed rest never exceed the bytes pushed, and that Ogg units
/// are whole valid pages. Returns the units.
fn frame(format: Format, data: &[u8]) -> Vec<Unit> {
    let mut f = Framer::new(format);
    let mut split = Split::new(data);
    let mut units = Vec::new();
    let (mut out, mut garbage, mut pushed) = (0usize, 0usize, 0usize);
    let mut rest = data;
    let drain = |f: &mut Framer, units: &mut Vec<Unit>, out: &mut usize, garbage: &mut usize| {
        while let Some(r) = f.next_unit() {
            match r {
                Ok(u) => {
                    *out += u.data.len();
                    assert!(!u.data.is_empty(), "empty unit");
                    units.push(u);
                }
                Err(FrameError::Garbage { skipped, .. }) => *garbage += skipped,
            }
        }
    };
    while !rest.is_empty() {
        let n = split.piece().min(rest.len());
        f.push(&rest[..n]);
        pushed += n;
        rest = &rest[n..];
        drain(&mut f, &mut units, &mut out, &mut garbage);
        assert!(out + garbage <= pushed, "framer returned more than given");
    }
    f.finish();
    drain(&mut f, &mut units, &mut out, &mut garbage);
    let _ = f.params();
    let left = f.into_unconsumed().len();
    assert!(
        out + garbage + left <= pushed,
        "units {out} + garbage {garbage} + unconsumed {left} > pushed {pushed}"
    );
    if format == Format::Ogg {
        // (Garbage at the very end, under the report threshold, is never reported.)
        for u in &units {
            match ogg::parse_page(&u.data) {
                PageParse::Page(p) => assert_eq!(p.bytes.len(), u.data.len()),
                _ => panic!("an Ogg unit is not one valid page"),
            }
        }
    }
    units
}

fn framer_mp3(data: &[u8]) {
    frame(Format::Mp3, data);
}

fn framer_adts(data: &[u8]) {
    frame(Format::Aac, data);
}

fn framer_ogg(data: &[u8]) {
    for u in frame(Format::Ogg, data) {
        if let PageParse::Page(p) = ogg::parse_page(&u.data) {
            let _ = p.packets_completed();
            if let Some(packet) = p.first_packet() {
                let c = ogg::Codec::identify(packet);
                let _ = (c.header_packets(), c.granule_rate(), c.name());
            }
        }
    }
}

/// Vorbis comment headers and OpusTags packets (sources' Ogg headers): a parsed header written
/// back parses to the same; setting a title keeps it readable.
fn ogg_comments(data: &[u8]) {
    use throng_proto::ogg_comments::CommentHeader;
    let Ok(mut h) = CommentHeader::parse(data) else {
        return;
    };
    let _ = h.get("TITLE");
    if let Ok(p) = h.to_packet() {
        let again = CommentHeader::parse(&p).expect("a written header parses");
        assert_eq!(again, h, "written header parses differently");
    }
    let title = text(&data[data.len() / 2..]);
    h.set("TITLE", Some(&title));
    if let Ok(p) = h.to_packet() {
        let again = CommentHeader::parse(&p).expect("a retitled header parses");
        let got = again.get("TITLE");
        assert!(got.is_some(), "TITLE lost");
    }
}

/// Ogg rechaining (admin metadata for Ogg mounts): frames the input, requests a title update
/// partway, and checks every unit published is a valid page.
fn ogg_rechain(data: &[u8]) {
    use throng_proto::ogg_rechain::{Rechainer, TagUpdate};
    let units = frame(Format::Ogg, data);
    let mut split = Split::new(data);
    let mut r = Rechainer::new(split.next() as u32);
    let at = if units.is_empty() {
        0
    } else {
        (split.next() as usize) % units.len()
    };
    let mut emitted = Vec::new();
    for (i, u) in units.into_iter().enumerate() {
        if i == at || split.next().is_multiple_of(16) {
            r.request(TagUpdate {
                title: format!("title {i} \u{e9}'\";"),
                artist: (i % 2 == 0).then(|| "artist".to_owned()),
            });
        }
        let _ = r.push(u, &mut |u| emitted.push(u));
        let _ = r.status();
    }
    for u in emitted {
        match ogg::parse_page(&u.data) {
            PageParse::Page(p) => assert_eq!(p.bytes.len(), u.data.len()),
            _ => panic!("rechainer emitted a unit that is not one valid page"),
        }
    }
}

/// htpasswd files: parse, look users up, remove one; bcrypt hashes are only classified (a
/// cost in the file decides their CPU time, which is the file owner's choice).
fn htpasswd(data: &[u8]) {
    use throng_proto::htpasswd::{without_user, Htpasswd, PasswordHash};
    let s = text(data);
    let (file, _problems) = Htpasswd::parse(&s);
    let names: Vec<String> = file.names().iter().map(|n| n.to_string()).collect();
    // Reading splits a line at its last `:` and deleting at its first, both as Icecast does;
    // they agree on the names `user_line` can write (no `:`), in a UTF-8 file.
    let utf8 = std::str::from_utf8(data).is_ok();
    for (i, n) in names.iter().enumerate() {
        // One verification per input (MD5-crypt is 1000 rounds of MD5 by design).
        if let Some(h) = file.hash_of(n).filter(|_| i == 0) {
            if !matches!(h, PasswordHash::Bcrypt(_)) {
                let _ = h.verify("password");
            }
        }
        if !utf8 || n.contains(':') || i >= 4 {
            continue;
        }
        let (rest, removed) = without_user(data, n);
        assert!(removed, "user {n:?} not removed");
        assert!(rest.len() < data.len());
    }
    let (_, removed) = without_user(data, "");
    let _ = removed;
    for line in s.lines().take(8) {
        if let Some((_, hash)) = line.split_once(':') {
            let _ = PasswordHash::parse(hash);
        }
    }
}

/// SHOUTcast v1 source logins: password line, login, then `icy-*` headers.
fn shoutcast(data: &[u8]) {
    use throng_proto::shoutcast::{looks_like_http, parse_headers, password_line, Login};
    let Some((line, used)) = password_line(data) else {
        return;
    };
    assert!(used <= data.len() && line.len() < used);
    let _ = looks_like_http(line);
    let login = Login::parse(line);
    let _ = login.matches("source", "hackme");
    if let Ok(Some((headers, n))) = parse_headers(&data[used..]) {
        assert!(n <= data.len() - used);
        let _ = throng_proto::source_info::SourceInfo::from_headers(&headers);
    }
}

/// The stream headers the server sends listeners for a source's description (as
/// `throng_server`'s `mount::live::stream_headers`: one of each, from [`SourceInfo`]).
///
/// [`SourceInfo`]: throng_proto::source_info::SourceInfo
fn stream_headers(info: &throng_proto::source_info::SourceInfo) -> Vec<(String, String)> {
    let mut h = Vec::new();
    let mut add = |k: &str, v: &str| h.push((k.to_owned(), v.to_owned()));
    if let Some(b) = &info.bitrate {
        add("icy-br", b);
    }
    if let Some(a) = &info.audio_info_raw {
        add("ice-audio-info", a);
    }
    add("icy-description", &info.description);
    add("icy-genre", &info.genre);
    add("icy-name", &info.name);
    add("icy-pub", if info.public { "1" } else { "0" });
    if let Some(u) = &info.url {
        add("icy-url", u);
    }
    h
}

/// Listener response heads built from a source's announced headers: whatever a source sends
/// in its request head, the head a listener gets parses as a response, ends where it should
/// (no blank line injected) and carries each stream header once (none injected).
fn listener_head(data: &[u8]) {
    use throng_proto::http::parse_response_head;
    use throng_proto::listener_head::ListenerHead;
    let Ok(Some((req, _))) = throng_proto::http::parse_request_head(data) else {
        return;
    };
    let info = throng_proto::source_info::SourceInfo::from_headers(&req.headers);
    let stream_headers = stream_headers(&info);
    let ct = req.header("content-type").unwrap_or("audio/mpeg");
    let head = ListenerHead {
        server_id: "Throng",
        date: "Fri, 20 Nov 2026 22:00:00 GMT",
        content_type: ct,
        stream_headers: stream_headers.clone(),
        metaint: Some(16_000),
        extra_headers: &[],
    };
    let bytes = head.to_bytes();
    if bytes.len() > throng_proto::http::MAX_HEAD_BYTES {
        return;
    }
    let (resp, len) = parse_response_head(&bytes)
        .unwrap_or_else(|e| panic!("listener head does not parse: {e}"))
        .expect("listener head is complete");
    assert_eq!(len, bytes.len(), "listener head has a blank line inside");
    for (k, _) in &stream_headers {
        let n = resp.headers.iter().filter(|(name, _)| name == k).count();
        assert_eq!(n, 1, "{k} appears {n} times");
    }
    let known = resp
        .headers
        .iter()
        .filter(|(k, _)| (k.starts_with("icy-") || k.starts_with("ice-")) && k != "icy-metaint")
        .count();
    assert_eq!(known, stream_headers.len(), "injected stream headers");
}

/// `icecast.xml` imports (a file an operator brings from Icecast).
fn icecast_xml(data: &[u8]) {
    let s = text(data);
    let _ = throng_server::config::icecast_xml::parse(&s, Path::new("/nonexistent/fuzz"));
}

/// Throng's TOML configuration: parse and validate; a valid one written back reads the same.
fn toml_config(data: &[u8]) {
    use throng_server::config::Config;
    let s = text(data);
    if let Ok(c) = Config::from_toml(&s) {
        if let Ok(t) = c.to_toml() {
            let again = Config::from_toml(&t).expect("written config reads back");
            assert_eq!(
                format!("{again:?}"),
                format!("{c:?}"),
                "written config differs"
            );
        }
    }
}

fn asset(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../assets")
            .join(name),
    )
    .unwrap_or_default()
}

fn seeds_http_request() -> Vec<Vec<u8>> {
    [
        &b"GET /stream.mp3 HTTP/1.1\r\nHost: localhost:8000\r\nIcy-MetaData: 1\r\nUser-Agent: VLC/3.0\r\n\r\n"[..],
        b"SOURCE /live.ogg ICE/1.0\r\nAuthorization: Basic c291cmNlOmhhY2ttZQ==\r\nContent-Type: audio/ogg\r\nice-name: My Radio\r\nice-audio-info: ice-samplerate=44100;ice-bitrate=128;ice-channels=2\r\n\r\n",
        b"PUT /live.mp3 HTTP/1.1\r\nHost: x\r\nAuthorization: Basic c291cmNlOmhhY2ttZQ==\r\nContent-Type: audio/mpeg\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\nicy-name: Caf\xe9\r\nicy-br: 128\r\nicy-genre: Rock\r\n\r\n\xff\xfb\x90\x00",
        b"GET /admin/metadata?mount=/live.mp3&mode=updinfo&song=Artist%20-%20Title&charset=latin1 HTTP/1.0\r\nAuthorization: Basic YWRtaW46aGFja21l\r\nX-Forwarded-For: 10.0.0.1, 192.168.1.2\r\n\r\n",
        b"POST /api/v1/mounts/live.mp3/metadata HTTP/1.1\r\nContent-Length: 25\r\nContent-Type: application/json\r\n\r\n{\"title\":\"a \\u0000 b\"}",
        b"GET /%2e%2e/a%00b?x=%ff HTTP/1.1\r\n\r\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_http_response() -> Vec<Vec<u8>> {
    [
        &b"HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\nicy-metaint: 16000\r\nicy-name: Radio\r\n\r\n\xff\xfb"[..],
        b"ICY 200 OK\r\nicy-notice1: <BR>This stream requires Winamp<BR>\r\nicy-metaint:8192\r\ncontent-type:audio/aacp\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nicecast-auth-user: 1\r\nicecast-auth-timelimit: 3600\r\nicecast-auth-message: ok\r\n\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: http://example.com/x.mp3\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"Icecast2 Server\"\r\n\r\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_basic_auth() -> Vec<Vec<u8>> {
    [
        &b"Basic c291cmNlOmhhY2ttZQ=="[..],
        b"basic  YWRtaW46aGFjazptZQ==",
        b"Basic Og==",
        b"Basic w6k6w6k=",
        b"Bearer abc",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_url_auth() -> Vec<Vec<u8>> {
    [
        &b"http://user:p%40ss@auth.example.com:8080/listener_add?x=1#frag"[..],
        b"icecast-auth-user: 1\nicecast-auth-timelimit\nicecast-auth-user: 1\nicecast-auth-timelimit: 60\nicecast-auth-message: welcome",
        b"http://[::1]:80/auth",
        b"http://host?q=1",
        b"HTTP://a@b@c:65536/",
        b"caf\xc3\xa9 &=+%% 'x'",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_icy() -> Vec<Vec<u8>> {
    let mut a = vec![16u8, 0];
    a.extend_from_slice(&[0xAA; 16]);
    let block = throng_proto::icy::metadata_block("Artist - Title", Some("http://x/"));
    a.extend_from_slice(&block);
    a.extend_from_slice(&[0xAA; 16]);
    a.push(0);
    a.extend_from_slice(&[0xAA; 16]);
    a.extend_from_slice(&throng_proto::icy::metadata_block("It's \u{e9};", None));
    let mut b = vec![4u8, 0, 1, 2, 3, 4, 2];
    b.extend_from_slice(b"StreamTitle='a\0b';StreamUrl='';\0\0");
    vec![a, b]
}

/// The first `n` bytes of an asset (seeds stay small so mutations reach every part).
fn asset_head(name: &str, n: usize) -> Vec<u8> {
    let mut a = asset(name);
    a.truncate(n);
    a
}

fn seeds_mp3() -> Vec<Vec<u8>> {
    let mut id3 = b"ID3\x04\0\0\0\0\0\x0aTIT2\0\0\0\0\0\0".to_vec();
    id3.extend_from_slice(&asset_head("demo.mp3", 3000));
    vec![asset_head("demo.mp3", 5000), id3]
}

fn seeds_adts() -> Vec<Vec<u8>> {
    vec![asset_head("test-tone.aac", 5000)]
}

fn seeds_ogg() -> Vec<Vec<u8>> {
    vec![asset_head("test-tone.opus", 8000)]
}

fn seeds_ogg_small() -> Vec<Vec<u8>> {
    vec![asset_head("test-tone.opus", 4000)]
}

fn seeds_ogg_comments() -> Vec<Vec<u8>> {
    use throng_proto::ogg_comments::CommentHeader;
    let mut out = Vec::new();
    let opus = asset("test-tone.opus");
    // The comment packet of the asset: the first packet of its second page.
    let mut rest = &opus[..];
    while let PageParse::Page(p) = ogg::parse_page(rest) {
        if let Some(pk) = p.first_packet() {
            if CommentHeader::parse(pk).is_ok() {
                out.push(pk.to_vec());
            }
        }
        rest = &rest[p.bytes.len()..];
        if !out.is_empty() {
            break;
        }
    }
    let mut v = b"\x03vorbis".to_vec();
    v.extend_from_slice(&4u32.to_le_bytes());
    v.extend_from_slice(b"Xiph");
    v.extend_from_slice(&2u32.to_le_bytes());
    for c in [&b"TITLE=Song"[..], b"ARTIST=Someone"] {
        v.extend_from_slice(&(c.len() as u32).to_le_bytes());
        v.extend_from_slice(c);
    }
    v.push(1);
    out.push(v);
    out
}

fn seeds_htpasswd() -> Vec<Vec<u8>> {
    [
        &b"alice:5f4dcc3b5aa765d61d8327deb882cf99\nbob:$apr1$salt1234$4mdb/FvH2Q0ArWSJQMLoR.\ncarol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n"[..],
        b"dave:$2y$05$abcdefghijklmnopqrstuu5E0L7YQ8sBbS1y8wK2s7wJc2Kf6Q8kS\n# comment\n\n:nouser\nbad line\neve:$1$xy$abcdefghijklmnopqrstuv\r\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_shoutcast() -> Vec<Vec<u8>> {
    [
        &b"hackme\r\nicy-name:My Radio\r\nicy-genre:Rock\r\nicy-br:128\r\ncontent-type:audio/mpeg\r\n\r\n\xff\xfb"[..],
        b"/live.mp3:source:hackme\r\r\nicy-pub:1\r\n\r\n",
        b"GET / HTTP/1.0\r\n\r\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

fn seeds_icecast_xml() -> Vec<Vec<u8>> {
    let mut out = vec![br#"<icecast>
  <limits><clients>100</clients><sources>2</sources><queue-size>524288</queue-size><burst-size>65535</burst-size><header-timeout>15</header-timeout></limits>
  <authentication><source-password>hackme</source-password><admin-user>admin</admin-user><admin-password>hackme</admin-password></authentication>
  <hostname>localhost</hostname>
  <listen-socket><port>8000</port><bind-address>127.0.0.1</bind-address><shoutcast-mount>/live.mp3</shoutcast-mount></listen-socket>
  <mount type="normal"><mount-name>/live.mp3</mount-name><password>pw</password><max-listeners>10</max-listeners><fallback-mount>/f.mp3</fallback-mount><hidden>1</hidden>
    <authentication type="url"><option name="listener_add" value="http://a/b"/></authentication>
    <http-headers><header name="X-A" value="b"/></http-headers></mount>
  <mount type="default"><mount-name>/*.ogg</mount-name><charset>ISO8859-1</charset></mount>
  <relay><server>127.0.0.1</server><port>8001</port><mount>/x</mount><local-mount>/y</local-mount></relay>
  <paths><basedir>/usr/share/icecast2</basedir><logdir>/var/log/icecast2</logdir><webroot>/usr/share/icecast2/web</webroot><alias source="/" destination="/status.xsl"/></paths>
  <logging><accesslog>access.log</accesslog><loglevel>3</loglevel></logging>
  <security><chroot>0</chroot></security>
</icecast>
"#
    .to_vec()];
    for p in [
        "../server/tests/data/icecast-full.xml",
        "../server/tests/data/debian-icecast.xml",
    ] {
        if let Ok(b) = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(p)) {
            out.push(b);
        }
    }
    out
}

fn seeds_toml() -> Vec<Vec<u8>> {
    let mut out = vec![br#"listen = ["127.0.0.1:8000"]
[limits]
clients = 100
[[mount]]
name = "/live.mp3"
password = "x"
"#
    .to_vec()];
    let ex = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../throng.example.toml"));
    if let Ok(b) = ex {
        out.push(b);
    }
    out
}

/// The PROXY protocol header (v1 text, v2 binary) a load balancer sends: the length is within
/// the input, and every prefix of a whole header asks for more bytes.
fn proxy_protocol(data: &[u8]) {
    use throng_proto::proxy_protocol::parse;
    if let Ok(Some((_, len))) = parse(data) {
        assert!(len <= data.len(), "header longer than the input");
        for n in 0..len {
            assert_eq!(
                parse(&data[..n]),
                Ok(None),
                "a prefix of {n} bytes is not incomplete"
            );
        }
    }
}

fn seeds_proxy_protocol() -> Vec<Vec<u8>> {
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    v2.extend_from_slice(&[192, 0, 2, 7, 10, 0, 0, 1, 0xdc, 0x04, 0x1f, 0x40]);
    v2.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    vec![
        b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 8000\r\nGET / HTTP/1.1\r\n\r\n".to_vec(),
        b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        v2,
    ]
}

/// The HLS playlist parser of the bench's player (`throng_proto::hls::playlist::parse`): never
/// panics; segment sequence numbers count up by one; a media playlist rendered again from what
/// was parsed parses to the same segments, target duration and blocking-reload flag.
fn hls_playlist(data: &[u8]) {
    use throng_proto::hls::playlist::{parse, MediaPlaylist, PlaylistSegment};
    let Some(p) = parse(&text(data)) else {
        return;
    };
    for w in p.segments.windows(2) {
        assert_eq!(w[1].0, w[0].0.saturating_add(1), "sequence numbers");
    }
    for (_, uri, _) in &p.segments {
        assert!(!uri.is_empty() && !uri.starts_with('#') && !uri.contains('\n'));
    }
    // Numbering starts from the media sequence known at the first segment.
    let first = p.segments.first().map_or(p.media_sequence, |s| s.0);
    let again = MediaPlaylist {
        target_duration: p.target_duration,
        media_sequence: first,
        segments: p
            .segments
            .iter()
            .map(|(_, uri, d)| PlaylistSegment {
                uri: uri.clone(),
                duration_secs: *d,
                discontinuity: false,
                program_date_time_ms: None,
                map_uri: None,
                parts: Vec::new(),
            })
            .collect(),
        ended: p.ended,
        can_block_reload: p.can_block_reload,
        ..MediaPlaylist::default()
    };
    let q = parse(&again.render()).expect("a rendered playlist parses");
    let uris = |p: &throng_proto::hls::playlist::ParsedPlaylist| {
        p.segments
            .iter()
            .map(|(n, u, _)| (*n, u.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(uris(&q), uris(&p));
    assert_eq!(
        (q.target_duration, q.ended, q.can_block_reload),
        (p.target_duration, p.ended, p.can_block_reload)
    );
}

fn seeds_hls_playlist() -> Vec<Vec<u8>> {
    use throng_proto::hls::playlist::{master, MediaPlaylist, PlaylistSegment};
    let seg = |uri: &str, disc| PlaylistSegment {
        uri: uri.into(),
        duration_secs: 4.023,
        discontinuity: disc,
        program_date_time_ms: Some(1_795_380_604_005),
        map_uri: None,
        parts: Vec::new(),
    };
    let media = MediaPlaylist {
        target_duration: 4,
        media_sequence: 1_795_380_600,
        discontinuity_sequence: 1,
        segments: vec![seg("1795380600.mp3", false), seg("1795380601.aac", true)],
        ended: false,
        can_block_reload: true,
        low_latency: None,
    };
    vec![
        media.render().into_bytes(),
        master("index.m3u8?session=abc", 64_000).into_bytes(),
        b"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551615\n#EXTINF:1,\na\n#EXTINF:2,\nb\n"
            .to_vec(),
    ]
}
