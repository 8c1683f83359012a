//! YP directory listing (`[[directory]]`, Icecast `<directory>`): two small YP directories in
//! the test see a public mount added (Icecast's fields), touched with its title and listeners
//! under the `SID` they returned, and removed when the source ends; a mount that is not public
//! is never sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use throng_proto::auth::basic_authorization;

use crate::support::*;

/// A YP directory answering as dir.xiph.org's CGI: `YPResponse: 1`, an `SID` for an add.
fn directory(sid: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let (addr, bodies) = capture_endpoint(move |body| {
        let extra = if body.starts_with("action=add") {
            format!("SID: {sid}\r\nTouchFreq: 30\r\n")
        } else {
            String::new()
        };
        format!("YPResponse: 1\r\nYPMessage: Successful\r\n{extra}")
    });
    (format!("http://{addr}/cgi-bin/yp-cgi"), bodies)
}

#[test]
fn public_mounts_are_added_touched_and_removed_in_every_directory() {
    let (one, seen_one) = directory("sid-one");
    let (two, seen_two) = directory("sid-two");
    let srv = TestServer::start(&format!(
        "hostname = \"radio.example.org\"\n\
         [[mount]]\nname = \"/pub.mp3\"\ncluster-password = \"c1\"\n\
         [[directory]]\nyp-url = \"{one}\"\n[[directory]]\nyp-url = \"{two}\"\nyp-url-timeout = 5\n"
    ));
    let src = Source::start_with(
        srv.addr,
        "/pub.mp3",
        "SOURCE",
        1.0,
        &[
            "ice-public: 1",
            "ice-genre: Jazz",
            "ice-description: Late night",
        ],
    );
    let _private = Source::start(srv.addr, "/private.mp3", "SOURCE", 1.0);
    srv.wait_mount("/pub.mp3");
    let _l = Listener::open(srv.addr, "/pub.mp3", false);
    let admin = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/pub.mp3&mode=updinfo&song=Night%20Train",
        &[&admin],
    );
    assert_eq!(head.status, 200);

    for (seen, sid) in [(&seen_one, "sid-one"), (&seen_two, "sid-two")] {
        wait_until(Duration::from_secs(15), || {
            seen.lock()
                .unwrap()
                .iter()
                .any(|b| b.starts_with("action=touch"))
        })
        .expect("added, then touched within 5 s");
        let bodies = seen.lock().unwrap().clone();
        let add = &bodies[0];
        assert!(add.starts_with("action=add&"), "{add}");
        for field in [
            "&sn=Test%20Stream&",
            "&genre=Jazz&cpswd=c1&",
            "&desc=Late%20night&",
            "&listenurl=http%3a%2f%2fradio%2eexample%2eorg%3a",
            "%2fpub%2emp3&type=audio%2fmpeg&stype=MP3&",
        ] {
            assert!(add.contains(field), "{field} in {add}");
        }
        let touch = bodies
            .iter()
            .find(|b| b.starts_with("action=touch"))
            .unwrap();
        assert!(
            touch.starts_with(&format!(
                "action=touch&sid={}&st=Night%20Train&listeners=1&",
                sid.replace('-', "%2d")
            )),
            "{touch}"
        );
        assert!(
            !bodies.iter().any(|b| b.contains("private")),
            "a mount that is not public is never sent: {bodies:?}"
        );
    }

    src.stop();
    for (seen, sid) in [(&seen_one, "sid%2done"), (&seen_two, "sid%2dtwo")] {
        wait_until(Duration::from_secs(10), || {
            seen.lock()
                .unwrap()
                .iter()
                .any(|b| *b == format!("action=remove&sid={sid}"))
        })
        .unwrap_or_else(|_| panic!("removed with its sid: {:?}", seen.lock().unwrap()));
    }
}
