//! `manageauth` over real sockets, as Icecast 2.4.4 `command_manageauth` and `auth_htpasswd.c`
//! answer it: listing, adding and deleting the users of a mount's htpasswd file with admin or
//! the mount's source credentials, the file on disk afterwards byte for byte, a listener
//! logging in with an added user (and refused once deleted), the refusals (no credentials,
//! a mount without htpasswd, missing parameters), the `.xsl` page, and the same operations
//! through the JSON API (`/api/v1/mounts/{mount}/users`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::htpasswd::md5_hex;
use throng_proto::http::parse_response_head;

use crate::admin_api::{assert_400, assert_401, call, get, server, Node, Reply, ADMIN};
use crate::support::{mp3_chain, wait_until, Source, TestServer, SOURCE_PW};

const SOURCE: (&str, &str) = ("source", SOURCE_PW);
/// Icecast's md5("secret").
const FRED: &str = "fred:5ebe2294ecd0e0f08eab7690d2a6ee69";
/// Apache `$apr1$` of "password".
const ANN: &str = "ann:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00";

/// A server with `/locked.mp3` on an htpasswd file (`# listeners`, fred, ann), `/paid.mp3` on
/// a URL authenticator and `/open.mp3` without authentication, each with a live source.
struct Setup {
    _dir: tempfile::TempDir,
    file: PathBuf,
    srv: TestServer,
    _sources: Vec<Source>,
}

fn setup() -> Setup {
    let dir = tempfile::Builder::new()
        .prefix("throng-it-manageauth")
        .tempdir()
        .unwrap();
    let file = dir.path().join("users");
    std::fs::write(&file, format!("# listeners\n{FRED}\n{ANN}\n")).unwrap();
    let srv = server(&format!(
        "[[mount]]\nname = \"/locked.mp3\"\nauthentication = {{ type = \"htpasswd\", filename = {:?} }}\n\
         [[mount]]\nname = \"/paid.mp3\"\nauthentication = {{ type = \"url\", listener-add = \"http://127.0.0.1:9/add\" }}\n",
        file.display().to_string()
    ));
    let sources = ["/locked.mp3", "/paid.mp3", "/open.mp3"]
        .iter()
        .map(|m| {
            let s = Source::start(srv.addr, m, "PUT", 2.0);
            srv.wait_mount(m);
            s
        })
        .collect();
    Setup {
        _dir: dir,
        file,
        srv,
        _sources: sources,
    }
}

fn read(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap()
}

/// The user names of a `manageauth` document, the names of the root's children, and its
/// message (checking Icecast's shape: `<icestats><source mount><User><username>…`).
fn manageauth_doc(r: &Reply, mount: &str) -> (Vec<String>, Vec<String>, Option<String>) {
    assert_eq!(r.status(), 200, "{}", r.body);
    let x: Node = r.xml();
    assert_eq!(x.name, "icestats");
    let src = x.source(mount).expect("<source mount>");
    assert!(src.children.iter().all(|c| c.name == "User"), "{}", r.body);
    let users = src
        .all("User")
        .iter()
        .map(|u| {
            assert_eq!(u.children.len(), 1, "{}", r.body);
            u.text_of("username").unwrap().to_owned()
        })
        .collect();
    let order = x.children.iter().map(|c| c.name.clone()).collect();
    let message = x.child("iceresponse").map(|ir| {
        // Only `<message>`: manageauth's response has no `<return>`.
        assert_eq!(ir.children.len(), 1, "{}", r.body);
        ir.text_of("message").unwrap().to_owned()
    });
    (users, order, message)
}

fn q(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `/admin/manageauth` on `mount` with `query` (`&`-joined, already escaped).
fn manageauth(srv: &TestServer, mount: &str, query: &str, auth: Option<(&str, &str)>) -> Reply {
    get(
        srv,
        &format!("/admin/manageauth?mount={}{query}", q(mount)),
        auth,
    )
}

/// A listener login on `path` with Basic credentials: the status, and for a 200 whether MP3
/// audio followed (a few chained frames within 5 s).
fn login(addr: SocketAddr, path: &str, user: &str, pass: &str) -> (u16, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: test\r\nUser-Agent: it-login\r\nAuthorization: {}\r\n\r\n",
        basic_authorization(user, pass)
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let end = Instant::now() + Duration::from_secs(5);
    let mut status = None;
    let mut body_at = 0;
    while Instant::now() < end {
        let n = match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if status.is_none() {
            if let Some((head, len)) = parse_response_head(&buf).unwrap() {
                if head.status != 200 {
                    return (head.status, false);
                }
                status = Some(head.status);
                body_at = len;
            }
        }
        if status.is_some() && buf.len() - body_at > 8192 {
            break;
        }
    }
    let status = status.expect("response head");
    // The burst may start mid-frame: find the first chain of frames.
    let body = &buf[body_at..];
    let audio = (0..body.len().min(4096)).any(|i| mp3_chain(&body[i..]).1 >= 3);
    (status, audio)
}

#[test]
fn manageauth_lists_adds_and_deletes_as_icecast() {
    let Setup { file, srv, .. } = &setup();
    let (srv, file) = (srv, file.as_path());
    let original = format!("# listeners\n{FRED}\n{ANN}\n");

    // list (the default action): users sorted, exactly Icecast's document.
    let r = manageauth(srv, "/locked.mp3", "", Some(ADMIN));
    assert_eq!(
        r.body,
        "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/locked.mp3\"><User><username>ann</username></User>\
         <User><username>fred</username></User></source></icestats>\n"
    );
    assert_eq!(
        manageauth_doc(&r, "/locked.mp3"),
        (
            vec!["ann".into(), "fred".into()],
            vec!["source".into()],
            None
        )
    );
    // An unknown action lists too, without a message.
    let r = manageauth(srv, "/locked.mp3", "&action=nope", Some(ADMIN));
    assert_eq!(manageauth_doc(&r, "/locked.mp3").2, None);

    // bob cannot listen yet.
    assert_eq!(login(srv.addr, "/locked.mp3", "bob", "hunter2").0, 401);

    // add, with the mount's source credentials: the line appended as Icecast writes it.
    let r = manageauth(
        srv,
        "/locked.mp3",
        "&action=add&username=bob&password=hunter2",
        Some(SOURCE),
    );
    assert_eq!(
        manageauth_doc(&r, "/locked.mp3"),
        (
            vec!["ann".into(), "bob".into(), "fred".into()],
            vec!["source".into(), "iceresponse".into()],
            Some("User added".into())
        )
    );
    assert_eq!(
        read(file),
        format!("{original}bob:{}\n", md5_hex("hunter2"))
    );
    assert_eq!(md5_hex("hunter2"), "2ab96390c7dbe3439de74d0c9b0b1767");

    // bob logs in at once and gets audio.
    assert_eq!(
        login(srv.addr, "/locked.mp3", "bob", "hunter2"),
        (200, true)
    );
    assert_eq!(login(srv.addr, "/locked.mp3", "bob", "wrong").0, 401);

    // add again: not added, file unchanged.
    let r = manageauth(
        srv,
        "/locked.mp3",
        "&action=add&username=bob&password=other",
        Some(ADMIN),
    );
    let (users, _, message) = manageauth_doc(&r, "/locked.mp3");
    assert_eq!(message.as_deref(), Some("User already exists - not added"));
    assert_eq!(users.len(), 3);
    assert_eq!(
        read(file),
        format!("{original}bob:{}\n", md5_hex("hunter2"))
    );

    // A user name with `:` is refused (it would name another user in the file).
    let r = manageauth(
        srv,
        "/locked.mp3",
        "&action=add&username=a%3Ab&password=x",
        Some(ADMIN),
    );
    assert_eq!(
        manageauth_doc(&r, "/locked.mp3").2.as_deref(),
        Some("User add failed - check the icecast error log")
    );

    // delete: the file rewritten as Icecast does (comment dropped), via a temporary file.
    wait_until(Duration::from_secs(5), || {
        srv.ctx
            .registry
            .get("/locked.mp3")
            .is_some_and(|m| m.listeners.load(std::sync::atomic::Ordering::Relaxed) == 0)
    })
    .expect("bob's login closed");
    let r = manageauth(
        srv,
        "/locked.mp3",
        "&action=delete&username=bob",
        Some(ADMIN),
    );
    assert_eq!(
        manageauth_doc(&r, "/locked.mp3"),
        (
            vec!["ann".into(), "fred".into()],
            vec!["source".into(), "iceresponse".into()],
            Some("User deleted".into())
        )
    );
    assert_eq!(read(file), format!("{FRED}\n{ANN}\n"));
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("users")]);
    assert_eq!(login(srv.addr, "/locked.mp3", "bob", "hunter2").0, 401);
    assert_eq!(
        login(srv.addr, "/locked.mp3", "fred", "secret"),
        (200, true)
    );

    // Deleting a user not listed is "User deleted" too, as Icecast.
    let r = manageauth(
        srv,
        "/locked.mp3",
        "&action=delete&username=nobody",
        Some(ADMIN),
    );
    assert_eq!(
        manageauth_doc(&r, "/locked.mp3").2.as_deref(),
        Some("User deleted")
    );

    // The .xsl page: the users with delete links and the add form.
    let r = get(
        srv,
        "/admin/manageauth.xsl?mount=/locked.mp3&action=add&username=carl&password=pw",
        Some(ADMIN),
    );
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.body.contains("User added"), "{}", r.body);
    assert!(
        r.body.contains(
            "href=\"manageauth.xsl?mount=/locked.mp3&amp;username=carl&amp;action=delete\""
        ),
        "{}",
        r.body
    );
    assert!(r.body.contains("name=\"action\" value=\"add\""));
    assert_eq!(login(srv.addr, "/locked.mp3", "carl", "pw"), (200, true));
}

#[test]
fn manageauth_refusals_as_icecast() {
    let Setup { srv, file, .. } = &setup();
    let original = read(file);
    let paths = [
        "/admin/manageauth?mount=/locked.mp3",
        "/admin/manageauth.xsl?mount=/locked.mp3",
        "/admin/manageauth?mount=/locked.mp3&action=add&username=eve&password=x",
        "/admin/manageauth?mount=/locked.mp3&action=delete&username=fred",
    ];
    for p in paths {
        assert_401(&get(srv, p, None), p);
        assert_401(&get(srv, p, Some(("admin", "wrong"))), p);
    }
    assert_eq!(read(file), original, "nothing changed without credentials");

    // A mount without authentication: 400 "missing parameter", whatever the action.
    for query in ["", "&action=add&username=eve&password=x"] {
        assert_400(
            &manageauth(srv, "/open.mp3", query, Some(ADMIN)),
            "missing parameter",
        );
    }
    // add without username or password, delete without username.
    for query in [
        "&action=add&username=eve",
        "&action=add&password=x",
        "&action=delete",
    ] {
        assert_400(
            &manageauth(srv, "/locked.mp3", query, Some(ADMIN)),
            "missing parameter",
        );
    }
    // No such mount, as every mount command.
    assert_400(
        &manageauth(srv, "/gone.mp3", "", Some(ADMIN)),
        "Source does not exist",
    );
    assert_eq!(read(file), original);

    // A URL authenticator has no users (Icecast's `auth_url.c` stubs): an empty list, and
    // adds and deletes fail.
    let r = manageauth(srv, "/paid.mp3", "", Some(ADMIN));
    assert_eq!(
        r.body,
        "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/paid.mp3\"/></icestats>\n"
    );
    let r = manageauth(
        srv,
        "/paid.mp3",
        "&action=add&username=eve&password=x",
        Some(ADMIN),
    );
    assert_eq!(
        manageauth_doc(&r, "/paid.mp3").2.as_deref(),
        Some("User add failed - check the icecast error log")
    );
    let r = manageauth(srv, "/paid.mp3", "&action=delete&username=eve", Some(ADMIN));
    assert_eq!(
        manageauth_doc(&r, "/paid.mp3").2.as_deref(),
        Some("User delete failed - check the icecast error log")
    );
}

#[test]
fn json_api_manages_users() {
    let Setup { srv, file, .. } = &setup();
    let api = |method: &str, path: &str, auth, body: &str| call(srv.addr, method, path, auth, body);

    let r = api("GET", "/api/v1/mounts/locked.mp3/users", None, "");
    assert_401(&r, "GET users without credentials");
    let r = api("GET", "/api/v1/mounts/locked.mp3/users", Some(SOURCE), "");
    assert_eq!(r.status(), 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"mount": "/locked.mp3", "users": ["ann", "fred"]})
    );

    let add = r#"{"username":"dora","password":"pw d"}"#;
    let r = api("POST", "/api/v1/mounts/locked.mp3/users", Some(ADMIN), add);
    assert_eq!(r.status(), 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"ok": true, "message": "User added"})
    );
    assert!(read(file).ends_with(&format!("\ndora:{}\n", md5_hex("pw d"))));
    assert_eq!(login(srv.addr, "/locked.mp3", "dora", "pw d"), (200, true));
    let r = api("POST", "/api/v1/mounts/locked.mp3/users", Some(ADMIN), add);
    assert_eq!(r.status(), 409, "{}", r.body);
    assert_eq!(r.json()["message"], "User already exists - not added");
    let r = api(
        "POST",
        "/api/v1/mounts/locked.mp3/users",
        Some(ADMIN),
        r#"{"username":"x"}"#,
    );
    assert_eq!(r.status(), 400, "{}", r.body);

    wait_until(Duration::from_secs(5), || {
        srv.ctx
            .registry
            .get("/locked.mp3")
            .is_some_and(|m| m.listeners.load(std::sync::atomic::Ordering::Relaxed) == 0)
    })
    .expect("dora's login closed");
    let r = api(
        "DELETE",
        "/api/v1/mounts/locked.mp3/users/dora",
        Some(ADMIN),
        "",
    );
    assert_eq!(r.status(), 200, "{}", r.body);
    assert_eq!(r.json()["message"], "User deleted");
    assert_eq!(read(file), format!("{FRED}\n{ANN}\n"));
    assert_eq!(login(srv.addr, "/locked.mp3", "dora", "pw d").0, 401);
    let r = api(
        "DELETE",
        "/api/v1/mounts/locked.mp3/users/dora",
        Some(ADMIN),
        "",
    );
    assert_eq!(r.status(), 404, "{}", r.body);

    let r = api("GET", "/api/v1/mounts/open.mp3/users", Some(ADMIN), "");
    assert_eq!(r.status(), 400, "{}", r.body);
    let r = api("PUT", "/api/v1/mounts/locked.mp3/users", Some(ADMIN), "");
    assert_eq!(r.status(), 405, "{}", r.body);
}
