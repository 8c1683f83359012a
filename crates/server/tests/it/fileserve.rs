//! `[paths] fileserve` (Icecast `<fileserve>`) over real sockets (issue 42, probe 6): webroot
//! files are streamed with bounded memory per connection, `Range` gets `206` or `416`, and
//! `HEAD`, `If-None-Match` and `Last-Modified` are answered from the file's metadata (an ETag
//! of size and modification time) without reading it; the webroot's safety rules still hold.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use throng_proto::http::{parse_response_head, ResponseHead};

use crate::support::*;

/// The bytes of a test file of `len` bytes (a pattern, so that a wrong offset shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The config of a server serving `root` with fileserve on.
fn fileserve_config(root: &Path) -> String {
    format!("[paths]\nwebroot = {:?}\nfileserve = true\n", root)
}

/// Sends `method path` with extra header lines; returns the head and everything after it (read
/// until the server closes).
fn ask(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> (ResponseHead, Vec<u8>) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let out = exchange(addr, req.as_bytes());
    let (head, len) = parse_response_head(&out)
        .unwrap()
        .unwrap_or_else(|| panic!("{method} {path}: no response head"));
    (head, out[len..].to_vec())
}

/// The ETag the server gives a file of this metadata: size and modification time.
fn size_time_etag(meta: &std::fs::Metadata) -> String {
    let t = meta.modified().unwrap().duration_since(UNIX_EPOCH).unwrap();
    format!(
        "\"{:x}.{:x}-{:x}\"",
        t.as_secs(),
        t.subsec_nanos(),
        meta.len()
    )
}

#[test]
fn ranges_heads_and_validators_are_answered_from_the_file_s_metadata() {
    const LEN: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("web");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("song.mp3");
    let bytes = pattern(LEN);
    std::fs::write(&file, &bytes).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    let etag = size_time_etag(&meta);
    let last_modified = httpdate::fmt_http_date(meta.modified().unwrap());
    let srv = TestServer::start(&fileserve_config(&root));

    // The whole file, with its validators.
    let (head, body) = ask(srv.addr, "GET", "/song.mp3", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(body, bytes);
    assert_eq!(head.header("content-length"), Some("100000"));
    assert_eq!(head.header("content-type"), Some("audio/mpeg"));
    assert_eq!(head.header("accept-ranges"), Some("bytes"));
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    assert_eq!(head.header("last-modified"), Some(last_modified.as_str()));

    // Single ranges (RFC 9110 §14.2): first-last, 0-0, a suffix, an open end, a last past the end.
    for (range, start, end) in [
        ("bytes=0-0", 0, 0),
        ("bytes=1000-1999", 1000, 1999),
        ("bytes=-500", LEN - 500, LEN - 1),
        ("bytes=99900-", 99_900, LEN - 1),
        ("bytes=99990-200000", 99_990, LEN - 1),
    ] {
        let (head, body) = ask(srv.addr, "GET", "/song.mp3", &[&format!("Range: {range}")]);
        assert_eq!(head.status, 206, "{range}");
        assert_eq!(
            head.header("content-range"),
            Some(format!("bytes {start}-{end}/{LEN}").as_str()),
            "{range}"
        );
        assert_eq!(
            head.header("content-length"),
            Some((end - start + 1).to_string().as_str()),
            "{range}"
        );
        assert_eq!(body, &bytes[start..=end], "{range}");
    }

    // The file's last access time, set two days back: a read of the file moves it (relatime
    // updates an access time older than a day), so it shows whether the server read the file.
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 86_400);
    let atime = |f: &Path| std::fs::metadata(f).unwrap().accessed().unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_accessed(two_days_ago))
        .unwrap();
    let untouched = atime(&file);

    // An unsatisfiable range: 416 with the length (RFC 9110 §14.4), no body.
    for range in ["bytes=100000-", "bytes=200000-300000", "bytes=-0"] {
        let (head, body) = ask(srv.addr, "GET", "/song.mp3", &[&format!("Range: {range}")]);
        assert_eq!(head.status, 416, "{range}");
        assert_eq!(
            head.header("content-range"),
            Some(format!("bytes */{LEN}").as_str())
        );
        assert!(body.is_empty(), "{range}: {} bytes", body.len());
    }
    // HEAD: the length, no body.
    let (head, body) = ask(srv.addr, "HEAD", "/song.mp3", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("100000"));
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    assert_eq!(head.header("last-modified"), Some(last_modified.as_str()));
    assert!(body.is_empty(), "HEAD sent {} bytes", body.len());
    // If-None-Match with the size+mtime tag (RFC 9110 §13.1.2), and If-Modified-Since.
    for cond in [
        format!("If-None-Match: {etag}"),
        format!("If-None-Match: \"x\", W/{etag}"),
        format!("If-Modified-Since: {last_modified}"),
    ] {
        let (head, body) = ask(srv.addr, "GET", "/song.mp3", &[&cond]);
        assert_eq!(head.status, 304, "{cond}");
        assert_eq!(head.header("etag"), Some(etag.as_str()));
        assert!(body.is_empty(), "{cond}");
    }
    assert_eq!(atime(&file), untouched, "HEAD, 304 or 416 read the file");
    // The check can fail: a ranged GET reads the file and moves its access time.
    let (head, _) = ask(srv.addr, "GET", "/song.mp3", &["Range: bytes=0-0"]);
    assert_eq!(head.status, 206);
    assert_ne!(
        atime(&file),
        untouched,
        "a read did not move the access time (a noatime file system?)"
    );

    // Another tag, or an If-Range of another version: the whole file.
    let (head, body) = ask(srv.addr, "GET", "/song.mp3", &["If-None-Match: \"old\""]);
    assert_eq!((head.status, body.len()), (200, LEN));
    let (head, body) = ask(
        srv.addr,
        "GET",
        "/song.mp3",
        &["Range: bytes=0-0", "If-Range: \"old\""],
    );
    assert_eq!((head.status, body.len()), (200, LEN));
    let (head, body) = ask(
        srv.addr,
        "GET",
        "/song.mp3",
        &["Range: bytes=0-0", &format!("If-Range: {etag}")],
    );
    assert_eq!((head.status, body.len()), (206, 1));

    // A changed file has a new tag: the old one no longer gets 304.
    std::fs::write(&file, pattern(LEN + 1)).unwrap();
    let (head, body) = ask(
        srv.addr,
        "GET",
        "/song.mp3",
        &[&format!("If-None-Match: {etag}")],
    );
    assert_eq!((head.status, body.len()), (200, LEN + 1));
    assert_ne!(head.header("etag"), Some(etag.as_str()));
}

#[test]
fn fileserve_keeps_the_webroot_s_safety_rules() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("web");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("robots.txt"), "User-agent: *\n").unwrap();
    std::fs::write(root.join("sub/page.html"), "<p>hi</p>").unwrap();
    std::fs::write(root.join(".hidden"), "hidden secret").unwrap();
    std::fs::write(root.join("big.bin"), vec![0u8; (16 << 20) + 1]).unwrap();
    std::fs::write(dir.path().join("outside.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), root.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("robots.txt"), root.join("inside.txt")).unwrap();
    let srv = TestServer::start(&fileserve_config(&root));

    let (head, body) = ask(srv.addr, "GET", "/robots.txt", &[]);
    assert_eq!(
        (head.status, body.as_slice()),
        (200, &b"User-agent: *\n"[..])
    );
    assert_eq!(
        head.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(head.header("cache-control"), Some("no-cache"));
    let (head, body) = ask(srv.addr, "GET", "/sub/page.html", &[]);
    assert_eq!((head.status, body.as_slice()), (200, &b"<p>hi</p>"[..]));
    assert_eq!(
        head.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    // A symlink that stays inside the webroot is served.
    let (head, body) = ask(srv.addr, "GET", "/inside.txt", &[]);
    assert_eq!(
        (head.status, body.as_slice()),
        (200, &b"User-agent: *\n"[..])
    );
    for method in ["GET", "HEAD"] {
        for path in [
            "/.hidden",
            "/escape.txt",
            "/big.bin",
            "/../outside.txt",
            "/%2e%2e/outside.txt",
            "/sub/..%2f..%2foutside.txt",
            "/sub/",
            "/missing.txt",
        ] {
            let (head, body) = ask(srv.addr, method, path, &["Range: bytes=0-"]);
            assert_ne!(head.status, 200, "{method} {path}");
            assert_ne!(head.status, 206, "{method} {path}");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("secret"), "{method} {path}: {text}");
        }
    }
}

#[test]
fn sixty_slow_clients_of_a_16_mib_file_hold_little_memory() {
    const LEN: usize = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("web");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.mp3"), pattern(LEN)).unwrap();
    let child = ChildServer::start(&fileserve_config(&root));
    let (pid, addr) = (child.pid, child.addr);
    let request = b"GET /big.mp3 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    // Warm up: the file once in full and once slowly, so that first-use allocations are in
    // the baseline.
    let (head, body) = ask(addr, "GET", "/big.mp3", &[]);
    assert_eq!((head.status, body.len()), (200, LEN));
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        assert_eq!(
            read_head(&mut s, Duration::from_secs(5)).map(|h| h.status),
            Some(200)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_millis(500));
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let (before, fds_before) = (rss_kib(pid), fds());

    // 60 clients ask for the file and read its head, then nothing more.
    let mut conns: Vec<TcpStream> = (0..60)
        .map(|i| {
            let mut s = connect_from(2 + (i % 30) as u8, addr);
            s.write_all(request).unwrap();
            let head = read_head(&mut s, Duration::from_secs(10));
            assert_eq!(head.map(|h| h.status), Some(200), "client {i}");
            s
        })
        .collect();
    // For 3 s the server holds them all (each has its socket open), and its memory is
    // sampled.
    let mut peak = 0;
    for _ in 0..30 {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    let held = fds();
    let grown = peak.saturating_sub(before);
    eprintln!(
        "server RSS {before} KiB before, peak {peak} KiB with 60 stalled clients of a 16 MiB file (+{grown} KiB); {held} descriptors open, {fds_before} before"
    );
    assert!(
        held >= fds_before + 60,
        "{held} descriptors open, {fds_before} before: the server no longer holds the clients"
    );
    assert!(
        grown < 20 * 1024,
        "60 slow clients of a 16 MiB file raised the server's RSS by {grown} KiB ({before} → {peak})"
    );
    // A slow client still gets the whole file, byte for byte, once it reads.
    let mut rest = Vec::new();
    conns[0]
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conns[0].read_to_end(&mut rest).unwrap();
    assert!(
        rest.len() <= LEN && rest.len() >= LEN - 4096,
        "{}",
        rest.len()
    );
    assert!(
        pattern(LEN).ends_with(&rest),
        "the tail read differs from the file"
    );
    drop(conns);
}
