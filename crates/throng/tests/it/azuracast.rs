//! Runs where Icecast runs (issue 26): an `icecast.xml` written exactly as AzuraCast's Icecast
//! frontend writes it (`backend/src/Radio/Frontend/Icecast.php`: element order, `charset
//! ISO8859-1`, `limit-rate`, an `intro` relative to the webroot, the AutoDJ fallback
//! `/fallback-[128].mp3`, URL listener auth with `auth_header`, deny files, `x-forwarded-for`,
//! the `/` → `/status.xsl` alias, `pidfile`, `logsize`, TLS certificate paths), started the way
//! AzuraCast starts it: `icecast -c icecast.xml` through an `icecast` symlink to the binary.
//! No element warns; Liquidsoap (AzuraCast's AutoDJ) pushes to the mount; the three requests of
//! AzuraCast's nowplaying library answer with the fields it reads; a SIGHUP after an edit
//! applies it and is confirmed at warn level; the pid file lives as long as the server.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quick_xml::events::Event;

use crate::support::*;

/// Passwords as AzuraCast generates them (random, never `hackme`).
const SOURCE_PW: &str = "Zq8fN2kd";
const ADMIN_PW: &str = "p4Xr7mWq";
const RELAY_PW: &str = "r9Tt2bLs";
/// The mount AzuraCast names for a station's first MP3 stream.
const MOUNT: &str = "/radio.mp3";
/// The title Liquidsoap sends in ISO-8859-1, as it reaches the status documents (UTF-8).
const TITLE: &str = "Señor - Café";

/// A station's directories: the config dir (AzuraCast `getRadioConfigDir()`), Icecast's base
/// dir with `web` and `admin`, and the ACME certificate paths.
struct Station {
    root: tempfile::TempDir,
}

impl Station {
    fn new() -> Station {
        let root = tempfile::Builder::new()
            .prefix("throng-azuracast-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        for d in ["config", "share/icecast/web", "share/icecast/admin", "acme"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        Station { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }
}

/// `Symfony\Component\Filesystem\Path::makeRelative(path, base)` for two absolute paths.
fn make_relative(path: &Path, base: &Path) -> String {
    let p: Vec<_> = path.components().collect();
    let b: Vec<_> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); b.len() - common];
    parts.extend(
        p[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// What an AzuraCast station sets that lands in its icecast.xml.
struct Settings<'a> {
    port: u16,
    source_pw: &'a str,
    admin_pw: &'a str,
    auth_url: String,
    hidden: bool,
}

/// The icecast.xml AzuraCast's `Icecast::getConfigurationArray` builds for a station with one
/// AutoDJ mount (128 kbit/s MP3, max bitrate 128, an intro, listener auth on because the
/// station bans countries), written as its `Xml\Writer` writes it: elements in the array's
/// order, `@name` keys as attributes.
fn azuracast_xml(st: &Station, s: &Settings<'_>) -> String {
    let config_dir = st.path("config");
    let base_dir = st.path("share/icecast");
    let web = base_dir.join("web");
    let intro = make_relative(&config_dir.join("intro.mp3"), &web);
    let hidden = if s.hidden {
        "\n\t\t<hidden>1</hidden>"
    } else {
        ""
    };
    let max_bitrate_bps = 128 * 1024 + 2500;
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<icecast>
	<location>AzuraCast</location>
	<admin>icemaster@localhost</admin>
	<hostname>localhost</hostname>
	<limits>
		<clients>2500</clients>
		<sources>1</sources>
		<queue-size>524288</queue-size>
		<client-timeout>30</client-timeout>
		<header-timeout>15</header-timeout>
		<source-timeout>10</source-timeout>
		<burst-size>65535</burst-size>
	</limits>
	<authentication>
		<source-password>{source_pw}</source-password>
		<relay-password>{RELAY_PW}</relay-password>
		<admin-user>admin</admin-user>
		<admin-password>{admin_pw}</admin-password>
	</authentication>
	<listen-socket>
		<port>{port}</port>
	</listen-socket>
	<mount type="normal">
		<mount-name>{MOUNT}</mount-name>
		<charset>ISO8859-1</charset>
		<stream-name>Café Radio</stream-name>
		<listenurl>http://localhost:{port}{MOUNT}</listenurl>
		<limit-rate>{max_bitrate_bps}</limit-rate>
		<stream-description>A station set up by AzuraCast</stream-description>
		<stream-url>https://radio.example.org</stream-url>
		<genre>Various</genre>{hidden}
		<intro>{intro}</intro>
		<fallback-mount>/fallback-[128].mp3</fallback-mount>
		<fallback-override>1</fallback-override>
		<max-listener-duration>3600</max-listener-duration>
		<authentication type="url">
			<option name="listener_add" value="{auth_url}"/>
			<option name="auth_header" value="icecast-auth-user: 1"/>
		</authentication>
	</mount>
	<fileserve>1</fileserve>
	<paths>
		<basedir>{base}</basedir>
		<logdir>{config}</logdir>
		<webroot>{web}</webroot>
		<adminroot>{base}/admin</adminroot>
		<pidfile>{config}/icecast.pid</pidfile>
		<alias source="/" dest="/status.xsl"/>
		<ssl-private-key>{acme}/ssl.key</ssl-private-key>
		<ssl-certificate>{acme}/ssl.crt</ssl-certificate>
		<ssl-allowed-ciphers>ECDH+AESGCM:DH+AESGCM:ECDH+AES256:DH+AES256:ECDH+AES128:DH+AES:RSA+AESGCM:RSA+AES:!aNULL:!MD5:!DSS</ssl-allowed-ciphers>
		<deny-ip>{config}/ip_bans.txt</deny-ip>
		<deny-agents>{config}/user_agent_bans.txt</deny-agents>
		<x-forwarded-for>127.0.0.1</x-forwarded-for>
	</paths>
	<logging>
		<accesslog>icecast_access.log</accesslog>
		<errorlog>/dev/stderr</errorlog>
		<loglevel>2</loglevel>
		<logsize>10000</logsize>
	</logging>
	<security>
		<chroot>0</chroot>
	</security>
</icecast>
"#,
        port = s.port,
        source_pw = s.source_pw,
        admin_pw = s.admin_pw,
        auth_url = s.auth_url.replace('&', "&amp;"),
        base = base_dir.display(),
        config = config_dir.display(),
        web = web.display(),
        acme = st.path("acme").display(),
    )
}

/// Writes what the generated file names: the ban files (`writeIpBansFile`,
/// `writeUserAgentBansFile`), the intro, the AutoDJ fallback file, a static file in the
/// webroot, and the ACME certificate and key.
fn station_files(st: &Station) {
    std::fs::write(st.path("config/ip_bans.txt"), "10.99.99.99\n").unwrap();
    std::fs::write(st.path("config/user_agent_bans.txt"), "BadBot*\n").unwrap();
    clip(&st.path("config/intro.mp3"), 1);
    clip(&st.path("share/icecast/web/fallback-[128].mp3"), 3);
    std::fs::write(st.path("share/icecast/web/robots.txt"), "User-agent: *\n").unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(st.path("acme/ssl.crt"), cert.pem()).unwrap();
    std::fs::write(st.path("acme/ssl.key"), key.serialize_pem()).unwrap();
}

/// The first `secs` seconds of the demo MP3, as a file.
fn clip(out: &Path, secs: u32) {
    let ok = Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-t",
            &secs.to_string(),
            "-i",
        ])
        .arg(asset("demo.mp3"))
        .args(["-c", "copy"])
        .arg(out)
        .status()
        .expect("run ffmpeg (scripts/install-deps.sh)")
        .success();
    assert!(ok, "ffmpeg could not write {}", out.display());
}

/// AzuraCast's listener-auth endpoint: answers every `listener_add` with the `auth_header`
/// AzuraCast's configuration names, and keeps the bodies it got.
struct AuthEndpoint {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl AuthEndpoint {
    fn start() -> AuthEndpoint {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/api/internal/1/listener-auth?api_auth=k3y",
            l.local_addr().unwrap()
        );
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { break };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut r = BufReader::new(s);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; len];
                let _ = r.read_exact(&mut body);
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).into_owned());
                let _ = r.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\nicecast-auth-user: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        AuthEndpoint { url, bodies }
    }
}

/// Liquidsoap 2.1 as AzuraCast's AutoDJ: a looped playlist of the demo clip, 128 kbit/s MP3,
/// metadata in ISO-8859-1 (the station's charset), to `MOUNT` over HTTP.
fn liquidsoap(st: &Station, port: u16) -> Child {
    let song = st.path("config/song.mp3");
    clip(&song, 20);
    let script = format!(
        "settings.init.allow_root.set(true)\n\
         settings.log.stdout.set(true)\n\
         settings.log.file.set(false)\n\
         s = mksafe(single(\"annotate:title=\\\"Café\\\",artist=\\\"Señor\\\":{song}\"))\n\
         output.icecast(%mp3(bitrate=128, samplerate=44100), host=\"127.0.0.1\", port={port}, \
         password=\"{SOURCE_PW}\", mount=\"{MOUNT}\", encoding=\"ISO-8859-1\", \
         name=\"Café Radio\", s)\n",
        song = song.display(),
    );
    let path = st.path("config/liquidsoap.liq");
    std::fs::write(&path, script).unwrap();
    let log = std::fs::File::create(st.path("config/liquidsoap.log")).unwrap();
    Command::new("liquidsoap")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn liquidsoap (scripts/install-deps.sh)")
}

/// A free port on the loopback (AzuraCast gives each station a fixed one).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The text of each direct child of the first element named `parent` (whose attribute
/// `mount`, when `mount` is given, has that value), as AzuraCast's SimpleXML reads them.
fn xml_children(xml: &str, parent: &str, mount: Option<&str>) -> Vec<HashMap<String, String>> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out: Vec<HashMap<String, String>> = Vec::new();
    let mut depth_in: Option<usize> = None;
    let mut depth = 0usize;
    let mut current: Option<String> = None;
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) => {
                depth += 1;
                let name = e.name().as_ref().to_owned();
                if depth_in.is_none() && name == parent {
                    let m = e
                        .attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == "mount")
                        .map(|a| a.value.into_owned());
                    if mount.is_none() || m.as_deref() == mount {
                        depth_in = Some(depth);
                        out.push(HashMap::new());
                    }
                } else if depth_in.is_some_and(|d| depth == d + 1) {
                    current = Some(name);
                }
            }
            Event::Text(t) => {
                if let (Some(name), Some(map)) = (&current, out.last_mut()) {
                    let text = t.xml10_content().into_owned();
                    map.entry(name.clone()).or_default().push_str(&text);
                }
            }
            // Characters outside ASCII come as character references (`&#xE9;`), as libxml2
            // writes them for Icecast.
            Event::GeneralRef(r) => {
                if let (Some(name), Some(map)) = (&current, out.last_mut()) {
                    let c = match r.resolve_char_ref().unwrap() {
                        Some(c) => c.to_string(),
                        None => quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                            .unwrap()
                            .to_owned(),
                    };
                    map.entry(name.clone()).or_default().push_str(&c);
                }
            }
            Event::End(_) => {
                if depth_in == Some(depth) {
                    depth_in = None;
                }
                current = None;
                depth -= 1;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// `GET path` with the admin credentials; the status and body.
fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, text) = get(addr, path, &basic("admin", ADMIN_PW));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// The body of a plain `GET path`.
fn body_of(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    let (status, text) = get(addr, path, headers);
    (
        status,
        text.split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_owned(),
    )
}

/// `/status-json.xsl`'s sources as a list (Icecast writes one source as an object).
fn status_sources(addr: SocketAddr) -> Vec<serde_json::Value> {
    let (status, body) = body_of(addr, "/status-json.xsl", "");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
    match &v["icestats"]["source"] {
        serde_json::Value::Array(a) => a.clone(),
        serde_json::Value::Null => Vec::new(),
        one => vec![one.clone()],
    }
}

#[test]
fn azuracast_station_runs_through_an_icecast_symlink() {
    let st = Station::new();
    station_files(&st);
    let auth = AuthEndpoint::start();
    let port = free_port();
    let settings = Settings {
        port,
        source_pw: SOURCE_PW,
        admin_pw: ADMIN_PW,
        auth_url: auth.url.clone(),
        hidden: false,
    };
    let xml = st.path("config/icecast.xml");
    std::fs::write(&xml, azuracast_xml(&st, &settings)).unwrap();

    // /usr/local/bin/icecast -c <station>/icecast.xml, as AzuraCast's supervisord runs it.
    let bin = st.path("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_throng"), bin.join("icecast")).unwrap();
    let mut cmd = Command::new(bin.join("icecast"));
    cmd.arg("-c").arg(&xml).current_dir(st.path("config"));
    let server = Serve::spawn_cmd(cmd);
    let addr = SocketAddr::from(([127, 0, 0, 1], server.addr.port()));
    assert_eq!(server.addr.port(), port);
    let startup = server.stderr().concat();
    assert!(
        !startup.to_ascii_lowercase().contains("warn"),
        "no element of AzuraCast's file may warn:\n{startup}"
    );

    // <pidfile>: written with the server's pid.
    let pidfile = st.path("config/icecast.pid");
    assert!(
        eventually(|| std::fs::read_to_string(&pidfile)
            .is_ok_and(|t| t.trim() == server.pid().to_string())),
        "pid file {}",
        pidfile.display()
    );

    // Nothing live yet: the AutoDJ fallback file `/fallback-[128].mp3` plays on the mount.
    let early = CountingListener::open(addr, MOUNT);
    assert!(
        eventually(|| early.received() > 16_000),
        "the fallback file plays before any source"
    );
    drop(early);

    // Liquidsoap (AzuraCast's AutoDJ) pushes to the mount.
    let _liq = Proc(liquidsoap(&st, port));
    let live = |src: &serde_json::Value| {
        src["listenurl"]
            .as_str()
            .is_some_and(|u| u.ends_with(MOUNT))
            && src["server_type"] == "audio/mpeg"
    };
    assert!(
        wait_until(Duration::from_secs(30), || status_sources(addr)
            .iter()
            .any(|s| live(s) && s["title"] == TITLE)),
        "Liquidsoap never went live with its title; its log:\n{}\nstatus: {:?}",
        std::fs::read_to_string(st.path("config/liquidsoap.log")).unwrap_or_default(),
        status_sources(addr)
    );

    // A listener, let in by the URL authenticator's `icecast-auth-user: 1`.
    let listener = CountingListener::open(addr, MOUNT);
    assert!(
        eventually(|| listener.received() > 32_000),
        "the listener gets audio"
    );
    assert!(
        auth.bodies
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.contains("action=listener_add") && b.contains("mount=%2fradio%2emp3")),
        "listener_add reached AzuraCast's endpoint: {:?}",
        auth.bodies.lock().unwrap()
    );
    // The deny files: a banned user agent is refused.
    let (status, _) = get(addr, MOUNT, "User-Agent: BadBot/2.0\r\n");
    assert_eq!(status, 403);

    // AzuraCast's nowplaying: /admin/stats (XML), /admin/listclients?mount= (XML),
    // /status-json.xsl (JSON), with the fields it reads.
    let (status, stats) = admin_get(addr, "/admin/stats");
    assert_eq!(status, 200, "{stats}");
    let src = &xml_children(&stats, "source", Some(MOUNT))[0];
    // Liquidsoap sends `song` (artist - title): AzuraCast splits it at " - ".
    assert_eq!(src.get("title").map(String::as_str), Some(TITLE), "{stats}");
    assert_eq!(
        src.get("server_type").map(String::as_str),
        Some("audio/mpeg")
    );
    assert!(src
        .get("listeners")
        .is_some_and(|l| l.parse::<u32>().unwrap() >= 1));
    let bitrate = ["audio_bitrate", "bitrate"]
        .iter()
        .filter_map(|k| src.get(*k).and_then(|v| v.parse::<u32>().ok()))
        .max();
    assert!(bitrate.is_some_and(|b| b > 0), "{stats}");
    let (status, clients) = admin_get(addr, &format!("/admin/listclients?mount={MOUNT}"));
    assert_eq!(status, 200, "{clients}");
    let listeners = xml_children(&clients, "listener", None);
    assert!(!listeners.is_empty(), "{clients}");
    for l in &listeners {
        for field in ["ID", "IP", "UserAgent", "Connected"] {
            assert!(l.contains_key(field), "{field} in {clients}");
        }
        assert_eq!(l["IP"], "127.0.0.1");
        l["Connected"].parse::<u64>().expect("seconds connected");
    }
    let sources = status_sources(addr);
    let json = sources
        .iter()
        .find(|s| live(s))
        .expect("the mount in status-json.xsl");
    assert!(json["listeners"].as_u64().is_some_and(|n| n >= 1), "{json}");
    assert_eq!(json["server_name"], "Café Radio");

    // `alias` `/` → `/status.xsl` and `fileserve`: webroot files are served.
    assert_eq!(body_of(addr, "/", "").0, 200);
    assert_eq!(body_of(addr, "/status.xsl", "").0, 200);
    assert_eq!(
        body_of(addr, "/robots.txt", ""),
        (200, "User-agent: *\n".to_owned())
    );
    assert_eq!(body_of(addr, "/../config/icecast.xml", "").0, 404);

    // The access log lands in <logdir> under its <accesslog> name.
    let access = st.path("config/icecast_access.log");
    assert!(eventually(
        || std::fs::read_to_string(&access).is_ok_and(|t| t.contains("GET /admin/stats"))
    ));

    // AzuraCast rewrites the file (the mount is made private) and sends SIGHUP: applied, and
    // confirmed at warn level (the file's <loglevel>2), with no warning about the file.
    let settings = Settings {
        hidden: true,
        ..settings
    };
    std::fs::write(&xml, azuracast_xml(&st, &settings)).unwrap();
    let line = server.signal_and_wait(libc::SIGHUP, "configuration reloaded");
    assert!(line.contains("WARN"), "{line}");
    assert!(
        eventually(|| !status_sources(addr).iter().any(live)),
        "the hidden mount left status-json.xsl"
    );
    assert!(listener.received() > 0 && !listener.is_closed());
    let after: Vec<String> = server
        .stderr()
        .into_iter()
        .filter(|l| l.contains("WARN") && !l.contains("configuration reloaded"))
        .collect();
    assert!(after.is_empty(), "{after:?}");

    // Stopped as AzuraCast stops it: the pid file goes with the server.
    drop(listener);
    let mut child = server.into_child();
    let status = signal_and_wait(&mut child, libc::SIGTERM);
    assert!(status.success(), "{status}");
    assert!(!pidfile.exists(), "the pid file is removed at exit");
}

#[test]
fn icecast_command_line_version_background_and_default_passwords() {
    let bin = env!("CARGO_BIN_EXE_throng");
    // `icecast2 -v` through a symlink, and `throng icecast -v`.
    let st = Station::new();
    std::fs::create_dir(st.path("bin")).unwrap();
    let icecast2 = st.path("bin/icecast2");
    std::os::unix::fs::symlink(bin, &icecast2).unwrap();
    for mut cmd in [Command::new(&icecast2), {
        let mut c = Command::new(bin);
        c.arg("icecast");
        c
    }] {
        let out = cmd.arg("-v").output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Icecast") && text.contains("Throng"),
            "{text}"
        );
    }
    // Without -c: Icecast's usage, exit status 2 (clap's usage error).
    let out = Command::new(&icecast2).output().unwrap();
    assert!(!out.status.success());

    // Debian's stock passwords: the file runs, but `check-config` names each one.
    station_files(&st);
    let settings = Settings {
        port: free_port(),
        source_pw: "hackme",
        admin_pw: "hackme",
        auth_url: "http://127.0.0.1:9/auth".into(),
        hidden: false,
    };
    let xml = st.path("config/icecast.xml");
    std::fs::write(&xml, azuracast_xml(&st, &settings)).unwrap();
    let out = Command::new(bin)
        .args(["check-config", "--icecast-config"])
        .arg(&xml)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for key in [
        "authentication.source-password",
        "authentication.admin-password",
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(key) && l.contains("\"hackme\"")),
            "{key}: {err}"
        );
    }
    assert!(!err.contains("relay-password"), "{err}");

    // `-b`: the starting process exits 0 at once; the server runs on, with its pid file.
    let out = Command::new(&icecast2)
        .arg("-b")
        .arg("-c")
        .arg(&xml)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pidfile = st.path("config/icecast.pid");
    assert!(
        eventually(|| pidfile.exists()),
        "the background server writes its pid"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], settings.port));
    assert!(eventually(|| TcpStream::connect(addr).is_ok()));
    // SAFETY: kill(2) on the background server this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(
        eventually(|| !pidfile.exists()),
        "the pid file goes at exit"
    );
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
