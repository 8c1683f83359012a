//! The station page's files and the admin web UI over real sockets (the browser-driven checks
//! are `web_page.rs`): embedded files with their content types and ETags, `[paths] webroot`
//! overrides served without path escapes (`..`, encoded dots, symlinks out of the root), the
//! admin UI's login, its CSRF token and cross-site refusal, and its forms acting through the
//! same operations as the Icecast commands (metadata, kick, fallback, htpasswd users, kill).

use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::http::parse_response_head;

use crate::admin_api::{call, get, Reply, ADMIN};
use crate::support::*;

/// Sends a form POST to `path` with `Host: test` and `extra` header lines.
fn post_form(srv: &TestServer, path: &str, body: &str, extra: &[&str]) -> Reply {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: {}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
        basic_authorization(ADMIN.0, ADMIN.1),
        body.len()
    );
    for h in extra {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    let out = exchange(srv.addr, req.as_bytes());
    let (head, len) = parse_response_head(&out).unwrap().expect("a reply");
    Reply {
        head,
        body: String::from_utf8_lossy(&out[len..]).into_owned(),
    }
}

/// The CSRF token in the forms of admin UI page `path`.
fn token_of(srv: &TestServer, path: &str) -> String {
    let r = get(srv, path, Some(ADMIN));
    assert_eq!(r.status(), 200, "{}", r.body);
    let at = r
        .body
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no csrf field in {}", r.body))
        + "name=\"csrf\" value=\"".len();
    r.body[at..at + 40].to_owned()
}

#[test]
fn the_station_page_and_its_files_are_embedded_with_types_and_etags() {
    let srv = TestServer::start("");
    let r = get(&srv, "/", None);
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.body.contains("/static/station.js"), "{}", r.body);
    assert!(r.body.contains("aria-live=\"polite\""));
    // No external CDN: every script, style and icon is this server's.
    for attr in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
        assert!(!r.body.contains(attr), "external reference {attr}");
    }
    for (path, ty) in [
        ("/static/station.js", "text/javascript; charset=utf-8"),
        ("/static/station.css", "text/css; charset=utf-8"),
        ("/static/admin.css", "text/css; charset=utf-8"),
        ("/static/favicon.svg", "image/svg+xml"),
    ] {
        let r = get(&srv, path, None);
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ty), "{path}");
        let tag = r.header("etag").expect("ETag").to_owned();
        let (head, body) = http_get(srv.addr, path, &[&format!("If-None-Match: {tag}")]);
        assert_eq!(head.status, 304, "{path}");
        assert!(body.is_empty());
    }
    assert_eq!(get(&srv, "/static/nothing.js", None).status(), 404);
}

#[test]
fn webroot_files_replace_the_embedded_ones_without_escaping_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("web");
    std::fs::create_dir_all(root.join("static/img")).unwrap();
    std::fs::write(
        root.join("index.html"),
        "<!doctype html><title>Mine</title>",
    )
    .unwrap();
    std::fs::write(root.join("static/station.css"), "body{color:red}").unwrap();
    std::fs::write(root.join("static/img/logo.png"), b"\x89PNG").unwrap();
    std::fs::write(root.join("secret.txt"), "webroot secret").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("outside.txt"),
        root.join("static/escape.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path(), root.join("static/up")).unwrap();
    let srv = TestServer::start(&format!("[paths]\nwebroot = {:?}", root));

    let r = get(&srv, "/", None);
    assert_eq!(r.body, "<!doctype html><title>Mine</title>");
    assert_eq!(
        get(&srv, "/static/station.css", None).body,
        "body{color:red}"
    );
    let png = get(&srv, "/static/img/logo.png", None);
    assert_eq!(png.status(), 200);
    assert_eq!(png.header("content-type"), Some("image/png"));
    // Files not overridden still come from the binary.
    assert!(get(&srv, "/static/station.js", None)
        .body
        .contains("EventSource"));
    for path in [
        "/static/../secret.txt",
        "/static/..%2fsecret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/%2E%2E%2Fsecret.txt",
        "/static/img/..%2f..%2fsecret.txt",
        "/static/escape.txt",
        "/static/up/outside.txt",
        "/static/.%2e/secret.txt",
        "/static/img/",
        "/static/",
    ] {
        let r = get(&srv, path, None);
        assert!(
            !r.body.contains("secret"),
            "{path} escaped the webroot: {}",
            r.body
        );
        assert_ne!(r.status(), 200, "{path}");
    }
}

#[test]
fn the_admin_ui_needs_the_admin_login_and_keeps_icecasts_admin_pages() {
    let srv = TestServer::start("");
    let _s = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    for path in ["/admin/", "/admin/ui/mount?mount=/live.mp3"] {
        let r = get(&srv, path, None);
        assert_eq!(r.status(), 401, "{path}");
        assert!(r.header("www-authenticate").is_some());
        assert_eq!(get(&srv, path, Some(("admin", "wrong"))).status(), 401);
    }
    let r = get(&srv, "/admin/", Some(ADMIN));
    assert_eq!(r.status(), 200);
    assert!(
        r.body.contains("/admin/ui/mount?mount=%2Flive%2Emp3"),
        "{}",
        r.body
    );
    // Icecast's pages and commands are unchanged, `/admin/?mount=` included.
    let r = get(&srv, "/admin/stats.xsl", Some(ADMIN));
    assert!(
        r.body.contains("<h2>source mount=/live.mp3</h2>"),
        "{}",
        r.body
    );
    let r = get(&srv, "/admin/?mount=/live.mp3", Some(ADMIN));
    assert!(
        r.body.contains("<h2>source mount=/live.mp3</h2>"),
        "{}",
        r.body
    );
    assert_eq!(get(&srv, "/admin/listmounts", Some(ADMIN)).status(), 200);
}

#[test]
fn admin_ui_forms_need_the_token_and_this_sites_pages() {
    let srv = TestServer::start("");
    let _s = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    let token = token_of(&srv, "/admin/ui/mount?mount=/live.mp3");
    let form = |t: &str, title: &str| format!("csrf={t}&mount=%2Flive.mp3&artist=&title={title}");

    // No token, a wrong one: 403, nothing changes.
    for body in [
        "mount=%2Flive.mp3&title=Forged".to_owned(),
        form(&"0".repeat(40), "Forged"),
    ] {
        let r = post_form(&srv, "/admin/ui/metadata", &body, &[]);
        assert_eq!(r.status(), 403, "{}", r.body);
    }
    // The right token sent from another site's page: refused by the guard.
    let r = post_form(
        &srv,
        "/admin/ui/metadata",
        &form(&token, "Forged"),
        &["Origin: http://evil.example"],
    );
    assert_eq!(r.status(), 403);
    assert_ne!(mount.title(), "Forged");
    // Without credentials: 401 before the body is read.
    let r = call(srv.addr, "POST", "/admin/ui/metadata", None, "");
    assert_eq!(r.status(), 401);

    // The token from this site's page: done, and back to the page with the outcome.
    let r = post_form(
        &srv,
        "/admin/ui/metadata",
        &form(&token, "Live+from+the+form"),
        &["Origin: http://test"],
    );
    assert_eq!(r.status(), 303, "{}", r.body);
    let location = r.header("location").unwrap().to_owned();
    assert!(location.starts_with("/admin/ui/mount?mount="), "{location}");
    assert!(location.contains("ok=1"), "{location}");
    assert_eq!(mount.title(), "Live from the form");
    let page = get(&srv, &location, Some(ADMIN));
    assert!(page.body.contains("Metadata update successful"));
    assert!(page.body.contains("Live from the form"));
}

#[test]
fn admin_ui_kicks_listeners_sets_fallbacks_manages_users_and_kills_sources() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "").unwrap();
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/live.mp3\"\nauthentication = {{ type = \"htpasswd\", filename = {users:?} }}\n"
    ));
    let _s = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    let _b = Source::start(srv.addr, "/backup.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    srv.wait_mount("/backup.mp3");
    let page = "/admin/ui/mount?mount=/live.mp3";
    let token = token_of(&srv, page);
    let act = |action: &str, fields: &str| {
        let r = post_form(
            &srv,
            &format!("/admin/ui/{action}"),
            &format!("csrf={token}&mount=%2Flive.mp3&{fields}"),
            &[],
        );
        assert_eq!(r.status(), 303, "{action}: {}", r.body);
        r.header("location").unwrap().to_owned()
    };

    // Users: added to the htpasswd file, listed, deleted.
    assert!(act("add-user", "username=fred&password=pw1").contains("ok=1"));
    assert!(std::fs::read_to_string(&users)
        .unwrap()
        .starts_with("fred:"));
    assert!(get(&srv, page, Some(ADMIN))
        .body
        .contains("Delete user fred"));
    assert!(act("add-user", "username=fred&password=pw2").contains("ok=0"));
    // A listener with those credentials, then kicked through the form.
    let mut l = {
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        std::io::Write::write_all(
            &mut s,
            format!(
                "GET /live.mp3 HTTP/1.0\r\nAuthorization: {}\r\n\r\n",
                basic_authorization("fred", "pw1")
            )
            .as_bytes(),
        )
        .unwrap();
        s
    };
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    wait_until(Duration::from_secs(10), || {
        mount.listeners.load(std::sync::atomic::Ordering::Relaxed) == 1
    })
    .expect("listener joined");
    let body = get(&srv, page, Some(ADMIN)).body;
    let at = body.find("data-kick=\"").expect("a kick button") + "data-kick=\"".len();
    let id: String = body[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(act("kill-client", &format!("id={id}")).contains("ok=1"));
    l.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut l, &mut sink);
    wait_until(Duration::from_secs(5), || {
        mount.listeners.load(std::sync::atomic::Ordering::Relaxed) == 0
    })
    .expect("listener kicked");
    assert!(act("kill-client", "id=999999").contains("ok=0"));
    assert!(act("delete-user", "username=fred").contains("ok=1"));
    assert!(!std::fs::read_to_string(&users).unwrap().contains("fred"));

    // Fallback, then a bad one refused.
    assert!(act("fallback", "fallback=%2Fbackup.mp3").contains("ok=1"));
    assert_eq!(
        srv.ctx.registry.fallback_of("/live.mp3").as_deref(),
        Some("/backup.mp3")
    );
    assert!(act("fallback", "fallback=no-slash").contains("ok=0"));
    // Move (nobody to move, but the operation runs), then kill the source.
    assert!(act("move", "destination=%2Fbackup.mp3").contains("ok=1"));
    let location = act("kill-source", "");
    assert!(location.starts_with("/admin/ui/?ok=1"), "{location}");
    let overview = get(&srv, &location, Some(ADMIN));
    assert!(
        overview.body.contains("Source of /live.mp3 removed"),
        "{}",
        overview.body
    );
    // An outcome line is shown only when this server signed it.
    let forged = get(&srv, "/admin/ui/?ok=1&msg=Go+to+evil.example", Some(ADMIN));
    assert!(!forged.body.contains("evil.example"));
    wait_until(Duration::from_secs(10), || {
        srv.ctx
            .registry
            .get("/live.mp3")
            .is_none_or(|m| m.queue.load().ended)
    })
    .expect("source killed");
}

/// A webroot file played as a fallback is listed as the file it is, with the mount it stands
/// in for, not as a mount with a page (issue 27); bitrates carry their unit; destructive
/// buttons ask first (`data-confirm`, read by `admin.js`).
#[test]
fn the_admin_ui_shows_fallback_files_as_files_and_asks_before_destroying() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("error.mp3");
    std::fs::copy(asset("demo.mp3"), &file).unwrap();
    let srv = TestServer::start(&format!(
        "[paths]\nwebroot = {:?}\n[[mount]]\nname = \"/live.mp3\"\nfallback-mount = \"/error.mp3\"\n",
        dir.path()
    ));
    srv.wait_mount("/error.mp3");
    let _s = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let r = get(&srv, "/admin/", Some(ADMIN));
    assert_eq!(r.status(), 200);
    let files = r
        .body
        .find("Fallback files")
        .expect("a Fallback files section");
    let listed = r
        .body
        .find(&file.display().to_string())
        .expect("the file's path");
    assert!(listed > files, "{}", r.body);
    assert!(
        !r.body.contains("/admin/ui/mount?mount=%2Ferror%2Emp3"),
        "no mount page for the file: {}",
        r.body
    );
    assert!(r.body.contains(" kbit/s<"), "{}", r.body);
    let _l = Listener::open(srv.addr, "/live.mp3", false);
    let r = get(&srv, "/admin/ui/mount?mount=/live.mp3", Some(ADMIN));
    for confirm in [
        "data-confirm=\"Kick ",
        "data-confirm=\"Really disconnect it?\"",
    ] {
        assert!(r.body.contains(confirm), "{confirm}: {}", r.body);
    }
    assert!(r.body.contains("src=\"/static/admin.js\""));
    assert_eq!(get(&srv, "/static/admin.js", None).status(), 200);
}
