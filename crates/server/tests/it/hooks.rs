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

/// Issue 42, probe 7: 300 listeners let in at once, each with an `exec` attach hook, run at most
/// `[hooks] max-concurrent` programs at once; `queue` more wait and start as others end, and
/// the rest are dropped and counted in `/metrics`. The hook program holds until the test opens
/// a gate, so the figures do not depend on how fast anything runs.
#[test]
fn hooks_of_300_listeners_run_at_most_max_concurrent_at_once_and_the_rest_queue_or_drop() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("hooks.log");
    let gate = dir.path().join("gate");
    let hook = dir.path().join("hold.sh");
    // Short appends to an O_APPEND file land whole, in the order they were written.
    script(
        &hook,
        &format!(
            "echo start >> {log}\nwhile [ ! -e {gate} ]; do sleep 0.1; done\necho end >> {log}",
            log = log.display(),
            gate = gate.display()
        ),
    );
    let srv = TestServer::start(&format!(
        "[hooks]\nmax-concurrent = 4\nqueue = 40\n\
         [[mount]]\nname = \"/crowd.mp3\"\n\
         [[mount.hook]]\ntrigger = \"source-listener-attach\"\nexec = \"{}\"\ntimeout = 60\n",
        hook.display()
    ));
    let src = Source::start(srv.addr, "/crowd.mp3", "SOURCE", 1.0);
    srv.wait_mount("/crowd.mp3");
    for _ in 0..300 {
        let l = Listener::open(srv.addr, "/crowd.mp3", false);
        assert_eq!(l.head.status, 200);
    }
    let lines = |word: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == word)
            .count()
    };
    let dropped = || {
        let (head, body) = http_get(srv.addr, "/metrics", &[]);
        assert_eq!(head.status, 200);
        let text = String::from_utf8(body).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("throng_hooks_dropped_total "))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .expect("throng_hooks_dropped_total in /metrics")
    };
    // While the gate is shut: 4 running, 40 waiting, 256 dropped.
    wait_until(Duration::from_secs(20), || {
        lines("start") == 4 && dropped() == 256
    })
    .unwrap_or_else(|_| panic!("started {}, dropped {}", lines("start"), dropped()));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lines("start"), 4, "no fifth hook while four run");
    assert_eq!(lines("end"), 0);

    // Open the gate: the 40 waiting hooks run, four at a time, and none of the dropped ones.
    std::fs::write(&gate, b"").unwrap();
    wait_until(Duration::from_secs(20), || lines("end") == 44)
        .unwrap_or_else(|_| panic!("{} of 44 hooks ended", lines("end")));
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&log).unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for line in text.lines() {
        running += if line == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(lines("start"), 44, "{text}");
    assert_eq!(running, 0);
    assert_eq!(most, 4, "at most max-concurrent at once: {text}");
    assert_eq!(dropped(), 256);
    src.stop();
}
