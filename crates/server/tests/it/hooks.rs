//! Event hooks (`[[mount.hook]]`, Icecast 2.5 `<event-bindings>`, KH `on-connect`): an `exec`
//! hook on source connect and disconnect runs with Icecast's arguments and environment; a
//! hanging hook does not delay the source or its listeners and is killed at its timeout; a `url`
//! hook gets Icecast's form fields when the title changes; listener attach and detach hooks run
//! where URL auth's `listener_add` and `listener_remove` do.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;

use crate::support::*;

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn exec_and_url_hooks_run_with_icecasts_arguments_and_never_delay_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let record = out.join("record.sh");
    script(
        &record,
        &format!(
            "{{ echo \"ARGS:$*\"; env | grep -E '^(EVENT_TRIGGER|SOURCE_ACTION|EVENT_URI|SOURCE_MOUNTPOINT|CLIENT_IP|CLIENT_ROLE|MOUNT_NAME|ICECAST_VERSION)='; }} > {}/\"$EVENT_TRIGGER\".txt",
            out.display()
        ),
    );
    let hang = out.join("hang.sh");
    script(
        &hang,
        &format!("echo $$ > {}/hang.pid\nexec sleep 60", out.display()),
    );
    let (addr, bodies) = capture_endpoint(|_| String::new());
    let url = format!("http://{addr}/hook");
    let srv = TestServer::start(&format!(
        "[[mount]]\nname = \"/hook.mp3\"\nstream-name = \"Hooked\"\n\
         [[mount.hook]]\ntrigger = \"source-connect\"\nexec = \"{hang}\"\ntimeout = 1\n\
         [[mount.hook]]\ntrigger = \"source-connect\"\nexec = \"{rec}\"\n\
         [[mount.hook]]\ntrigger = \"source-disconnect\"\nexec = \"{rec}\"\n\
         [[mount.hook]]\ntrigger = \"source-listener-attach\"\nexec = \"{rec}\"\n\
         [[mount.hook]]\ntrigger = \"source-listener-detach\"\nexec = \"{rec}\"\n\
         [[mount.hook]]\ntrigger = \"format-metadata-changed\"\nurl = \"{url}\"\naction = \"title_change\"\n",
        hang = hang.display(),
        rec = record.display(),
    ));

    // The source is answered and heard at once, whatever the hanging hook does.
    let t = Instant::now();
    let src = Source::start(srv.addr, "/hook.mp3", "SOURCE", 1.0);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "login took {:?}",
        t.elapsed()
    );
    srv.wait_mount("/hook.mp3");
    let mut l = Listener::open(srv.addr, "/hook.mp3", false);
    assert!(l.read_for(Duration::from_secs(2)).len() > 8000);

    // Icecast 2.5's legacy argv (the mount) and environment.
    let connect = out.join("source-connect.txt");
    wait_until(Duration::from_secs(5), || connect.exists()).expect("the connect hook ran");
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(&connect).unwrap();
    for want in [
        "ARGS:/hook.mp3\n",
        "EVENT_TRIGGER=source-connect\n",
        "SOURCE_ACTION=source-connect\n",
        "EVENT_URI=/hook.mp3\n",
        "SOURCE_MOUNTPOINT=/hook.mp3\n",
        "CLIENT_IP=127.0.0.1\n",
        "CLIENT_ROLE=source\n",
        "MOUNT_NAME=Hooked\n",
        "ICECAST_VERSION=Icecast",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }

    // The hanging hook is killed at its 1 s timeout.
    let pid_file = out.join("hang.pid");
    wait_until(Duration::from_secs(5), || pid_file.exists()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    wait_until(Duration::from_secs(5), || {
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    })
    .expect("the hanging hook is killed at its timeout");

    // A title change calls the url hook with Icecast's form fields.
    let admin = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    let (head, _) = http_get(
        srv.addr,
        "/admin/metadata?mount=/hook.mp3&mode=updinfo&song=Hello%20World",
        &[&admin],
    );
    assert_eq!(head.status, 200);
    wait_until(Duration::from_secs(5), || {
        !bodies.lock().unwrap().is_empty()
    })
    .expect("the url hook was called");
    let body = bodies.lock().unwrap()[0].clone();
    assert!(
        body.starts_with("action=title_change&mount=%2fhook%2emp3&client=")
            && body.contains("&role=source&")
            && body.contains("&ip=127%2e0%2e0%2e1&"),
        "{body}"
    );

    // The listener's attach (when it was let in) and detach (when it leaves).
    let attach = out.join("source-listener-attach.txt");
    wait_until(Duration::from_secs(5), || attach.exists()).expect("the attach hook ran");
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(&attach).unwrap();
    assert!(
        text.contains("ARGS:/hook.mp3\n") && text.contains("CLIENT_ROLE=listener\n"),
        "{text}"
    );
    drop(l);
    let detach = out.join("source-listener-detach.txt");
    wait_until(Duration::from_secs(10), || detach.exists()).expect("the detach hook ran");

    // Source disconnect.
    src.stop();
    let gone = out.join("source-disconnect.txt");
    wait_until(Duration::from_secs(5), || gone.exists()).expect("the disconnect hook ran");
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(&gone).unwrap();
    assert!(
        text.contains("ARGS:/hook.mp3\n") && text.contains("EVENT_TRIGGER=source-disconnect\n"),
        "{text}"
    );
}
