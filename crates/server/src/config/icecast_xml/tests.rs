//! Unit tests of the `icecast.xml` import over the Debian sample (`tests/data/debian-icecast.xml`),
//! a file with every supported element (`tests/data/icecast-full.xml`) and small documents for
//! each Icecast rule.

use std::path::{Path, PathBuf};

use super::sections::forwarder_cidr;
use super::*;
use crate::config::{AuthConfig, Config, HttpHeader, LagPolicy};
use UnsupportedKind::{Accepted, IgnoredByIcecast, NotSupported, Unknown};

fn data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn import(xml: &str) -> Import {
    parse(xml, Path::new("/etc/icecast")).unwrap_or_else(|e| panic!("{e}"))
}

fn reported(imp: &Import) -> Vec<(&str, UnsupportedKind)> {
    imp.unsupported
        .iter()
        .map(|u| (u.path.as_str(), u.kind))
        .collect()
}

fn roundtrip(c: &Config) {
    let text = c.to_toml().unwrap();
    let back = Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, c, "TOML:\n{text}");
}

#[test]
fn debian_sample_imports_with_its_values() {
    let imp = parse(&data("debian-icecast.xml"), Path::new("/etc/icecast2")).unwrap();
    let c = &imp.config;
    assert_eq!(c.listen, vec!["0.0.0.0:8000".parse().unwrap()]);
    assert_eq!(
        (c.location.as_str(), c.admin_email.as_str()),
        ("Earth", "icemaster@localhost")
    );
    assert_eq!(c.hostname, "localhost");
    assert_eq!(c.limits.clients, 100);
    assert_eq!(c.limits.sources, 2);
    assert_eq!(c.limits.queue_size, 524_288);
    assert_eq!(c.limits.burst_size, 65_535);
    assert_eq!((c.limits.header_timeout, c.limits.source_timeout), (15, 10));
    let a = &c.authentication;
    assert_eq!(a.source_password.as_deref(), Some("hackme"));
    assert_eq!(a.relay_password.as_deref(), Some("hackme"));
    assert_eq!(a.admin_user.as_deref(), Some("admin"));
    assert_eq!(a.admin_password.as_deref(), Some("hackme"));
    assert_eq!(c.http_headers.len(), 1);
    assert_eq!(c.http_headers[0].name, "Access-Control-Allow-Origin");
    assert_eq!(c.http_headers[0].value, "*");
    assert_eq!(
        c.paths.webroot.as_deref(),
        Some(Path::new("/usr/share/icecast2/web"))
    );
    assert_eq!(c.logging.access_log, "/var/log/icecast2/access.log");
    assert_eq!(c.logging.error_log, "/var/log/icecast2/error.log");
    assert_eq!(c.logging.level, "info");
    assert!(c.mount.is_empty() && c.relay.is_empty() && c.master.is_none());
    assert_eq!(c.shoutcast_mount, None);
    assert_eq!(
        reported(&imp),
        vec![
            ("icecast/limits/client-timeout", Accepted),
            ("icecast/paths/adminroot", Accepted),
            ("icecast/paths/basedir", Accepted),
        ]
    );
    roundtrip(c);
}

#[test]
fn every_supported_element_is_carried_over() {
    let imp = import(&data("icecast-full.xml"));
    let c = &imp.config;
    assert_eq!(c.location, "Studio & Tower");
    assert_eq!(c.admin_email, "ops@example.org");
    assert_eq!(c.hostname, "radio.example.org");
    assert_eq!(c.server_id, "Icecast 2.4.4");
    let l = &c.limits;
    assert_eq!((l.clients, l.sources, l.queue_size), (5000, 4, 1_048_576));
    assert_eq!((l.header_timeout, l.source_timeout), (7, 12));
    assert_eq!(
        l.burst_size, 32_768,
        "burst-size after burst-on-connect=0 wins"
    );
    assert_eq!(l.listener_sndbuf, 65_536);
    assert_eq!(l.lag_policy, LagPolicy::Drop);
    assert_eq!(c.workers, 3);
    let a = &c.authentication;
    assert_eq!(a.source_password.as_deref(), Some("src-pw"));
    assert_eq!(a.relay_user.as_deref(), Some("slave"));
    assert_eq!(a.relay_password.as_deref(), Some("relay-pw"));
    assert_eq!(a.admin_user.as_deref(), Some("boss"));
    assert_eq!(a.admin_password.as_deref(), Some("admin-pw"));
    assert_eq!(
        c.listen,
        vec![
            "127.0.0.1:8100".parse().unwrap(),
            "[::1]:8200".parse().unwrap()
        ],
        "the TLS socket is left out"
    );
    assert_eq!(c.shoutcast_mount.as_deref(), Some("/sc.mp3"));
    assert_eq!(
        c.http_headers,
        vec![header("Access-Control-Allow-Origin", "*")]
    );

    let m = c.master.as_ref().unwrap();
    assert_eq!((m.server.as_str(), m.port), ("master.example.org", 8001));
    assert_eq!(
        (m.username.as_str(), m.password.as_str()),
        ("relayer", "master-pw")
    );
    assert_eq!((m.update_interval, m.on_demand), (60, true));

    assert_eq!(c.relay.len(), 2);
    let r = &c.relay[0];
    assert_eq!((r.server.as_str(), r.port), ("origin.example.org", 8080));
    assert_eq!(
        (r.mount.as_str(), r.local()),
        ("/upstream.ogg", "/relayed.ogg")
    );
    assert_eq!(
        (r.username.as_deref(), r.password.as_deref()),
        (Some("ru"), Some("rp"))
    );
    assert!(!r.relay_metadata);
    assert!(r.on_demand, "relays-on-demand read before the relay");
    let r = &c.relay[1];
    assert_eq!(
        (r.local(), r.relay_metadata, r.on_demand),
        ("/always.mp3", true, false)
    );

    let names: Vec<&str> = c.mount.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["/live.mp3", "/backup.mp3", "/*"]);
    let live = &c.mount[0];
    assert_eq!(
        (live.username.as_deref(), live.password.as_deref()),
        (Some("dj"), Some("live-pw"))
    );
    assert_eq!(
        live.max_listeners,
        Some(100),
        "-1 is 'unset' for merge_mounts"
    );
    assert_eq!(live.fallback_mount.as_deref(), Some("/backup.mp3"));
    assert!(live.fallback_override && live.fallback_when_full && live.hidden);
    assert_eq!(live.public, Some(true));
    assert_eq!(live.stream_name.as_deref(), Some("Live Show"));
    assert_eq!(
        live.stream_description.as_deref(),
        Some("Live from the studio")
    );
    assert_eq!(
        live.stream_url.as_deref(),
        Some("http://radio.example.org/")
    );
    assert_eq!(live.genre.as_deref(), Some("Jazz"));
    assert_eq!(live.bitrate.as_deref(), Some("128"));
    assert_eq!(
        (live.queue_size, live.burst_size),
        (Some(262_144), Some(16_384))
    );
    assert_eq!(
        live.intro.as_deref(),
        Some(Path::new("/etc/icecast/web/intro.mp3"))
    );
    assert_eq!(live.max_listener_duration, Some(3600));
    assert_eq!(
        live.authentication,
        Some(AuthConfig::Htpasswd {
            filename: "/etc/icecast/users.htpasswd".into(),
            allow_duplicate_users: false,
        })
    );
    assert_eq!(
        live.http_headers,
        vec![header("X-Live", "yes"), header("X-Default", "d")]
    );

    let backup = &c.mount[1];
    assert_eq!(backup.max_listeners, Some(50));
    assert_eq!(backup.public, Some(false), "no-yp");
    assert_eq!(
        backup.authentication, None,
        "2.4.4 does not merge the authenticator"
    );
    assert_eq!(backup.max_listener_duration, Some(3600));

    let all = &c.mount[2];
    assert_eq!(all.max_listeners, Some(100));
    assert_eq!(all.public, Some(false));
    assert_eq!(all.http_headers, vec![header("X-Default", "d")]);
    let Some(AuthConfig::Url(u)) = &all.authentication else {
        panic!("{:?}", all.authentication)
    };
    assert_eq!(
        u.listener_add.as_deref(),
        Some("http://auth.example.org/add")
    );
    assert_eq!(
        u.listener_remove.as_deref(),
        Some("http://auth.example.org/remove")
    );
    assert_eq!(
        u.mount_add.as_deref(),
        Some("http://auth.example.org/start")
    );
    assert_eq!(
        u.mount_remove.as_deref(),
        Some("http://auth.example.org/stop")
    );
    assert_eq!(
        u.stream_auth.as_deref(),
        Some("http://auth.example.org/source")
    );
    assert_eq!(
        (u.username.as_deref(), u.password.as_deref()),
        (Some("au"), Some("ap"))
    );
    assert_eq!(u.headers.as_deref(), Some("x-token,x-pragma"));
    assert_eq!(u.header_prefix.as_deref(), Some("ClientHeader."));
    assert_eq!(u.auth_header.as_deref(), Some("icecast-auth-user: yes"));
    assert_eq!(
        u.timelimit_header.as_deref(),
        Some("icecast-auth-timelimit:")
    );
    assert_eq!(u.timeout, Some(15));
    assert_eq!(c.mount_for("/other.ogg").unwrap().name, "/*");

    let p = &c.paths;
    assert_eq!(p.webroot.as_deref(), Some(Path::new("/etc/icecast/web")));
    assert_eq!(
        p.deny_ip.as_deref(),
        Some(Path::new("/etc/icecast/deny.txt"))
    );
    assert_eq!(
        p.allow_ip.as_deref(),
        Some(Path::new("/etc/icecast/allow.txt"))
    );
    assert_eq!(
        p.deny_agents.as_deref(),
        Some(Path::new("/etc/icecast/agents.txt"))
    );
    assert_eq!(p.x_forwarded_for, ["10.1.2.3", "192.168.0.0/16"]);
    assert_eq!(c.logging.access_log, "/etc/icecast/logs/access.log");
    assert_eq!(c.logging.error_log, "-");
    assert_eq!(c.logging.level, "debug");
    assert_eq!(c.logging.logsize, Some(10_000));
    assert_eq!(
        p.pidfile.as_deref(),
        Some(Path::new("/etc/icecast/icecast.pid"))
    );
    assert_eq!(
        p.alias,
        [crate::config::Alias {
            source: "/".into(),
            destination: "/status.xsl".into()
        }]
    );
    assert!(!p.fileserve, "<fileserve>0</fileserve>");

    assert_eq!(
        reported(&imp),
        vec![
            ("icecast/limits/client-timeout", Accepted),
            ("icecast/limits/threadpool", Accepted),
            ("icecast/http-headers/header/@status", NotSupported),
            ("icecast/paths/adminroot", Accepted),
            ("icecast/security/changeowner", NotSupported),
            ("icecast/bogus-element", Unknown),
            // A TLS socket without a certificate, left out when the sockets are finished.
            ("icecast/listen-socket/ssl", NotSupported),
            ("icecast/paths/basedir", Accepted),
        ]
    );
    assert_eq!(c.directory.len(), 1);
    assert_eq!(c.directory[0].yp_url, "http://dir.xiph.org/cgi-bin/yp-cgi");
    assert_eq!(c.directory[0].yp_url_timeout, 15);
    let live = c.mount.iter().find(|m| m.name == "/live.mp3").unwrap();
    assert_eq!(live.dump_file.as_deref(), Some("/tmp/live.dump"));
    roundtrip(c);
}

fn header(name: &str, value: &str) -> HttpHeader {
    HttpHeader {
        name: name.into(),
        value: value.into(),
    }
}

#[test]
fn an_empty_file_yields_icecast_defaults() {
    let imp = import("<icecast/>");
    let c = &imp.config;
    assert_eq!(c.listen, vec!["0.0.0.0:8000".parse().unwrap()]);
    let l = &c.limits;
    assert_eq!(
        (l.clients, l.sources, l.queue_size, l.burst_size),
        (256, 16, 512_000, 65_536)
    );
    assert_eq!((l.header_timeout, l.source_timeout), (15, 10));
    assert_eq!(c.logging.access_log, "/usr/local/icecast/logs/access.log");
    assert_eq!(c.logging.error_log, "/usr/local/icecast/logs/error.log");
    assert_eq!(c.logging.level, "info");
    assert_eq!(
        c.paths.webroot.as_deref(),
        Some(Path::new("/usr/local/icecast/webroot"))
    );
    assert_eq!(c.authentication.source_password, None);
    assert!(!c.demo);
    assert!(imp.unsupported.is_empty());
    roundtrip(c);
}

#[test]
fn burst_on_connect_zero_disables_the_burst() {
    let c =
        import("<icecast><limits><burst-on-connect>0</burst-on-connect></limits></icecast>").config;
    assert_eq!(c.limits.burst_size, 0);
    let c =
        import("<icecast><limits><burst-on-connect>1</burst-on-connect></limits></icecast>").config;
    assert_eq!(c.limits.burst_size, 65_536);
}

#[test]
fn top_level_port_is_dropped_when_listen_sockets_exist() {
    let c =
        import("<icecast><port>9000</port><bind-address>127.0.0.2</bind-address></icecast>").config;
    assert_eq!(c.listen, vec!["127.0.0.2:9000".parse().unwrap()]);
    let imp = import(
        "<icecast><port>9000</port><listen-socket><port>9100</port></listen-socket></icecast>",
    );
    assert_eq!(imp.config.listen, vec!["0.0.0.0:9100".parse().unwrap()]);
    assert_eq!(reported(&imp), vec![("icecast/port", IgnoredByIcecast)]);
}

#[test]
fn shoutcast_compat_socket_after_the_first_port_takes_the_global_mount() {
    let imp = import(
        "<icecast><shoutcast-mount>/sc</shoutcast-mount>\
         <listen-socket><port>9000</port></listen-socket>\
         <listen-socket><port>9001</port><shoutcast-compat>1</shoutcast-compat></listen-socket>\
         </icecast>",
    );
    assert_eq!(imp.config.listen, vec!["0.0.0.0:9000".parse().unwrap()]);
    assert_eq!(imp.config.shoutcast_mount.as_deref(), Some("/sc"));
    assert!(imp.unsupported.is_empty(), "{:?}", imp.unsupported);
    let imp = import("<icecast><shoutcast-mount>/sc</shoutcast-mount></icecast>");
    assert_eq!(imp.config.shoutcast_mount, None);
    assert_eq!(
        reported(&imp),
        vec![("icecast/shoutcast-mount", IgnoredByIcecast)]
    );
}

#[test]
fn default_mounts_merge_only_where_their_pattern_matches() {
    let c = import(
        "<icecast>\
         <mount type=\"normal\"><mount-name>/show-1</mount-name><hidden>0</hidden></mount>\
         <mount type=\"normal\"><mount-name>/news</mount-name></mount>\
         <mount type=\"default\"><mount-name>/show-*</mount-name><hidden>1</hidden>\
           <burst-size>0</burst-size></mount>\
         </icecast>",
    )
    .config;
    let names: Vec<&str> = c.mount.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["/show-1", "/news", "/show-*"]);
    assert!(c.mount[0].hidden, "flags are OR-ed, as merge_mounts");
    assert_eq!(c.mount[0].burst_size, Some(0));
    assert!(!c.mount[1].hidden);
    assert_eq!(c.mount[1].burst_size, None);
    assert_eq!(c.mount_for("/show-2").unwrap().name, "/show-*");
}

#[test]
fn relays_on_demand_applies_to_later_relays_only() {
    let c = import(
        "<icecast><relay><port>1</port><mount>/a</mount></relay>\
         <relays-on-demand>1</relays-on-demand>\
         <relay><port>1</port><mount>/b</mount></relay></icecast>",
    )
    .config;
    assert_eq!(
        c.relay[0].server, "127.0.0.1",
        "Icecast's default relay server"
    );
    assert!(!c.relay[0].on_demand);
    assert!(c.relay[1].on_demand);
    assert!(c.master.is_none());
    let imp = import("<icecast><relay><mount>/a</mount></relay></icecast>");
    assert!(imp.config.relay.is_empty(), "port 0 never connects");
    assert_eq!(reported(&imp), vec![("icecast/relay", IgnoredByIcecast)]);
    let imp = import("<icecast><master-server>m</master-server></icecast>");
    assert!(imp.config.master.is_none());
    assert_eq!(
        reported(&imp),
        vec![("icecast/master-server", IgnoredByIcecast)]
    );
}

#[test]
fn chroot_resolves_every_path_inside_basedir() {
    let imp = import(
        "<icecast><security><chroot>1</chroot></security>\
         <paths><basedir>/srv/ice</basedir><logdir>/logs</logdir><webroot>/web</webroot>\
         <deny-ip>/deny</deny-ip></paths></icecast>",
    );
    let c = &imp.config;
    assert_eq!(c.logging.access_log, "/srv/ice/logs/access.log");
    assert_eq!(c.paths.webroot.as_deref(), Some(Path::new("/srv/ice/web")));
    assert_eq!(c.paths.deny_ip.as_deref(), Some(Path::new("/srv/ice/deny")));
    assert_eq!(
        reported(&imp),
        vec![("icecast/security/chroot", NotSupported)]
    );
}

#[test]
fn playlistlog_becomes_the_ledger_playlistlog_inside_logdir() {
    let imp = import(
        "<icecast><paths><logdir>/var/log/icecast2</logdir></paths>\
         <logging><playlistlog>playlist.log</playlistlog></logging></icecast>",
    );
    assert_eq!(
        imp.config.ledger.playlistlog.as_deref(),
        Some(Path::new("/var/log/icecast2/playlist.log"))
    );
    assert!(imp.unsupported.is_empty(), "{:?}", imp.unsupported);
    roundtrip(&imp.config);

    // Relative to a relative logdir (the XML file's directory), inside basedir under chroot,
    // an absolute name as it is; none without the element.
    let at = |xml: &str| import(xml).config.ledger.playlistlog;
    assert_eq!(
        at("<icecast><paths><logdir>logs</logdir></paths>\
            <logging><playlistlog>p.log</playlistlog></logging></icecast>"),
        Some(PathBuf::from("/etc/icecast/logs/p.log"))
    );
    assert_eq!(
        at("<icecast><security><chroot>1</chroot></security>\
            <paths><basedir>/srv/ice</basedir><logdir>/logs</logdir></paths>\
            <logging><playlistlog>p.log</playlistlog></logging></icecast>"),
        Some(PathBuf::from("/srv/ice/logs/p.log"))
    );
    assert_eq!(
        at("<icecast><logging><playlistlog>/srv/titles.log</playlistlog></logging></icecast>"),
        Some(PathBuf::from("/srv/titles.log"))
    );
    assert_eq!(at("<icecast/>"), None);
    let empty = import("<icecast><logging><playlistlog/></logging></icecast>");
    assert_eq!(empty.config.ledger.playlistlog, None);
    assert_eq!(
        reported(&empty),
        vec![("icecast/logging/playlistlog", IgnoredByIcecast)]
    );
}

#[test]
fn http_headers_stop_at_the_first_invalid_entry() {
    let imp = import(
        "<icecast><http-headers><header name=\"A\" value=\"1\"/><header name=\"B\"/>\
         <header name=\"C\" value=\"3\"/></http-headers></icecast>",
    );
    assert_eq!(imp.config.http_headers, vec![header("A", "1")]);
    assert_eq!(
        reported(&imp),
        vec![
            ("icecast/http-headers/header", IgnoredByIcecast),
            ("icecast/http-headers/header", IgnoredByIcecast),
        ]
    );
}

#[test]
fn mounts_icecast_would_drop_are_reported() {
    let imp = import(
        "<icecast><mount><username>x</username></mount>\
         <mount type=\"weird\"><mount-name>/w</mount-name></mount>\
         <mount><mount-name>nolead</mount-name></mount>\
         <mount><mount-name>/open</mount-name><authentication type=\"command\"/></mount>\
         </icecast>",
    );
    assert_eq!(imp.config.mount.len(), 1);
    assert_eq!(imp.config.mount[0].authentication, None);
    assert_eq!(
        reported(&imp),
        vec![
            ("icecast/mount", IgnoredByIcecast),
            ("icecast/mount/@type", IgnoredByIcecast),
            ("icecast/mount/mount-name", IgnoredByIcecast),
            ("icecast/mount/authentication/@type", NotSupported),
        ]
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let err = |xml: &str| parse(xml, Path::new("/")).unwrap_err().to_string();
    assert!(err("<icecast><limits>").contains("malformed XML"));
    assert!(err("<shoutcast/>").contains("not <icecast>"));
    let e = err("<icecast><limits><clients>lots</clients></limits></icecast>");
    assert!(
        e.contains("icecast/limits/clients") && e.contains("lots"),
        "{e}"
    );
    let e = err("<icecast><listen-socket><bind-address>example.org</bind-address></listen-socket></icecast>");
    assert!(e.contains("numeric"), "{e}");
    let e = err("<icecast><listen-socket><port>70000</port></listen-socket></icecast>");
    assert!(e.contains("port"), "{e}");
    let e = err("<icecast><limits><queue-size>100</queue-size></limits></icecast>");
    assert!(e.contains("queue-size"), "{e}");
    let e = err("<icecast><listen-socket><ssl>1</ssl></listen-socket></icecast>");
    assert!(e.contains("listen-socket"), "{e}");
    let e = err("<icecast><mount><mount-name>/a</mount-name><authentication type=\"htpasswd\"/></mount></icecast>");
    assert!(e.contains("filename"), "{e}");
}

#[test]
fn forwarder_wildcards_become_cidr_ranges() {
    assert_eq!(forwarder_cidr("10.0.*.*").as_deref(), Some("10.0.0.0/16"));
    assert_eq!(forwarder_cidr("*.*.*.*").as_deref(), Some("0.0.0.0/0"));
    assert_eq!(forwarder_cidr("::1").as_deref(), Some("::1"));
    assert_eq!(forwarder_cidr("10.*.0.1"), None);
    assert_eq!(forwarder_cidr("proxy.example.org"), None);
}

#[test]
fn ssl_sockets_and_certificates_import_as_tls() {
    // Icecast 2.4: `<ssl>1` and one PEM file holding chain and key.
    let imp = import(
        "<icecast><paths><ssl-certificate>/etc/icecast/icecast.pem</ssl-certificate></paths>\
         <listen-socket><port>8000</port></listen-socket>\
         <listen-socket><port>8443</port><ssl>1</ssl></listen-socket></icecast>",
    );
    let c = &imp.config;
    assert_eq!(c.listen, vec!["0.0.0.0:8000".parse().unwrap()]);
    assert_eq!(c.tls.listen, vec!["0.0.0.0:8443".parse().unwrap()]);
    let pem = PathBuf::from("/etc/icecast/icecast.pem");
    assert_eq!(c.tls.certificate[0].cert, pem);
    assert_eq!(c.tls.certificate[0].key, pem);
    roundtrip(c);
    // Icecast 2.5: `<tls-context>` and `tls` modes, as element or attribute.
    let imp = import(
        "<icecast><tls-context><tls-certificate>/c.pem</tls-certificate><tls-key>/k.pem</tls-key></tls-context>\
         <listen-socket><port>8000</port></listen-socket>\
         <listen-socket tls=\"auto\"><port>8001</port></listen-socket>\
         <listen-socket><port>8443</port><tls>rfc2818</tls></listen-socket>\
         <listen-socket><port>8444</port><tls>rfc2817</tls></listen-socket></icecast>",
    );
    let c = &imp.config;
    assert_eq!(c.tls.auto, vec!["0.0.0.0:8001".parse().unwrap()]);
    assert_eq!(c.tls.listen, vec!["0.0.0.0:8443".parse().unwrap()]);
    assert_eq!(
        c.listen,
        vec![
            "0.0.0.0:8000".parse().unwrap(),
            "0.0.0.0:8444".parse().unwrap()
        ],
        "an unknown mode stays plain (reported)"
    );
    assert_eq!(c.tls.certificate[0].key, PathBuf::from("/k.pem"));
    assert!(imp
        .unsupported
        .iter()
        .any(|u| u.path.ends_with("listen-socket/tls")));
    // A TLS socket without a certificate is left out, reported.
    let imp = import(
        "<icecast><listen-socket><port>8000</port></listen-socket>\
         <listen-socket><port>8443</port><ssl>1</ssl></listen-socket></icecast>",
    );
    assert!(imp.config.tls.listen.is_empty());
    assert!(imp
        .unsupported
        .iter()
        .any(|u| u.path.ends_with("listen-socket/ssl")));
}

#[test]
fn event_bindings_and_kh_scripts_become_hooks() {
    let imp = import(
        r#"<icecast>
  <event-bindings>
    <event type="url" trigger="source-disconnect">
      <option name="url" value="http://127.0.0.1/notify"/>
      <option name="action" value="mount_remove"/>
    </event>
    <event type="log" trigger="source-connect"/>
  </event-bindings>
  <mount type="normal">
    <mount-name>/live.mp3</mount-name>
    <on-connect>/usr/local/bin/on-air</on-connect>
    <mp3-metadata-interval>8192</mp3-metadata-interval>
    <event-bindings>
      <event type="exec" trigger="source-connect">
        <option name="executable" value="/bin/start"/>
        <option name="default_arguments" value="uri_and_trigger"/>
        <option type="argument" value="--loud"/>
      </event>
      <event type="exec" trigger="client-connect"><option name="executable" value="/x"/></event>
    </event-bindings>
  </mount>
</icecast>"#,
    );
    let c = &imp.config;
    assert_eq!(c.hook.len(), 1);
    assert_eq!(c.hook[0].url.as_deref(), Some("http://127.0.0.1/notify"));
    assert_eq!(c.hook[0].action.as_deref(), Some("mount_remove"));
    let m = &c.mount[0];
    assert_eq!(m.mp3_metadata_interval, Some(8192));
    assert_eq!(c.metaint_for("/live.mp3"), 8192);
    assert_eq!(m.hook.len(), 2);
    assert_eq!(m.hook[0].trigger, "source-connect");
    assert_eq!(
        m.hook[0].exec.as_deref(),
        Some(Path::new("/usr/local/bin/on-air"))
    );
    assert_eq!(
        m.hook[1].default_arguments.as_deref(),
        Some("uri_and_trigger")
    );
    assert_eq!(m.hook[1].arguments, ["--loud"]);
    assert_eq!(
        reported(&imp),
        vec![
            ("icecast/event-bindings/event", NotSupported),
            ("icecast/mount/event-bindings/event", NotSupported),
        ]
    );
    roundtrip(c);
}
